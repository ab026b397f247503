#!/bin/sh
# test_machine_file.sh: `dltrain plan --machine FILE` (planner/machine_file.c,
# man dltrain(1)).  Layer times from FLOPs, no tuning database, no
# calibration cache (an empty XDG_CACHE_HOME): the plan is reproducible, so
# - a machine file gives the same --json, byte for byte, as the options
#   that say the same (--ranks-per-node, --cores-per-node, --flops,
#   --node-link with add, --link), with and without --ranks (the file's
#   nodes x ranks per node); so do the shipped machines/vm-2core.yaml (also
#   by its name, vm-2core) and machines/v100-25gbit.yaml (ResNet-50, two
#   rank counts: the scaling rows);
# - each option given with the file wins: the JSON equals that of the
#   options alone with the option's value, and differs from the file's
#   (--node-link without add= keeps the file's add, as a second
#   --node-link keeps the first one's);
# - the table's header names the machine and its file;
# - bad files exit 2 with file:line:col and the key: unknown key, wrong
#   type, a negative rate, a bad unit, no link with nodes > 1, a missing
#   required key, YAML syntax, an empty file, a missing file; and a rank
#   count above the machine's exits 2.
. "$top_srcdir/tests/tap.sh"
T="$TMPDIR_TEST"
XDG_CACHE_HOME="$T/cache"
export XDG_CACHE_HOME
tap_plan 45

PLAN="$DLTRAIN plan --net $top_srcdir/nets/lenet5.yaml --no-db --threads 1 --json"
cat > "$T/m.yaml" <<'EOF'
# two nodes of two ranks
name: two-by-two
nodes: 2
ranks_per_node: 2
cores_per_node: 1
flops: 2e10
node_link: {alpha: 3us, bw: 2GB/s, add: 4GB/s}
link:
  alpha: 40us
  bw: 0.8Gbit/s
EOF
FLAGS="--ranks-per-node 2 --cores-per-node 1 --flops 2e10 --node-link alpha=3us,bw=2GB/s,add=4GB/s \
--link alpha=40us,bw=100MB/s"

# same_json NAME DESCRIPTION -- ARGS...: the JSON of plan with ARGS equals $T/NAME.json.
same_json() {
    name=$1 desc=$2
    shift 3
    "$@" > "$T/got.json" 2> "$T/got.err" && cmp -s "$T/$name.json" "$T/got.json"
    rc=$?
    [ $rc -eq 0 ] ||
        { echo "# differs from $name.json:"; head -c 600 "$T/got.err" "$T/got.json" | sed 's/^/#   /'; echo; }
    tap_result $rc "$desc"
}

$PLAN --ranks 4 $FLAGS > "$T/flags.json" 2> "$T/flags.err"
tap_result $? "plan with the options on 4 ranks"
same_json flags "--machine gives the options' JSON byte for byte" -- $PLAN --ranks 4 --machine "$T/m.yaml"
same_json flags "and without --ranks (2 nodes x 2 ranks)" -- $PLAN --machine "$T/m.yaml"
grep -q '"compute_scale": 2,' "$T/flags.json" && grep -q '"node_model": "alpha, bw and add given"' "$T/flags.json"
tap_result $? "the file's cores (1: 2 ranks share it) and node link with add are taken"

# Each option given with the file wins over the file's value.
override() {
    opt=$1 desc=$2
    shift 2
    $PLAN --ranks 4 $FLAGS "$@" > "$T/want.json" 2> /dev/null && ! cmp -s "$T/want.json" "$T/flags.json"
    tap_result $? "$desc changes the plan"
    same_json want "$desc with --machine: the option wins" -- $PLAN --ranks 4 --machine "$T/m.yaml" "$@"
}
override --link "--link alpha=400us,bw=100MB/s" --link alpha=400us,bw=100MB/s
override --node-link "--node-link alpha=3us,bw=200MB/s (the file's add kept)" --node-link alpha=3us,bw=200MB/s
override --node-link "--node-link alpha=3us,bw=2GB/s,add=1GB/s" --node-link alpha=3us,bw=2GB/s,add=1GB/s
override --flops "--flops 3e9" --flops 3e9
override --cores-per-node "--cores-per-node 4" --cores-per-node 4
override --ranks-per-node "--ranks-per-node 4" --ranks-per-node 4

# The shipped machines, against the options that describe them.
$PLAN --ranks 4 --ranks-per-node 4 --cores-per-node 2 --flops 1e10 > "$T/vm.json"
tap_result $? "plan with the options of machines/vm-2core.yaml"
same_json vm "machines/vm-2core.yaml gives the same JSON" -- $PLAN --flops 1e10 \
    --machine "$top_srcdir/machines/vm-2core.yaml"
same_json vm "--machine vm-2core: the shipped file by its name" -- env DLTRAIN_DATADIR="$top_srcdir" \
    $PLAN --flops 1e10 --machine vm-2core
R50="$DLTRAIN plan --net $top_srcdir/nets/resnet50.yaml --ranks 8,64 --batch 512 --no-db --json"
$R50 --ranks-per-node 8 --cores-per-node 40 --flops 4.4e12 --node-link alpha=2us,bw=100GB/s,add=400GB/s \
    --link alpha=5us,bw=3.125GB/s > "$T/v100.json"
tap_result $? "plan ResNet-50 on 8 and 64 ranks with the options of machines/v100-25gbit.yaml"
same_json v100 "machines/v100-25gbit.yaml gives the same JSON (layouts and scaling rows)" -- \
    $R50 --machine "$top_srcdir/machines/v100-25gbit.yaml"

expect_status 0 "the table with --machine" -- $DLTRAIN plan --net "$top_srcdir/nets/lenet5.yaml" --no-db --threads 1 \
    --machine "$T/m.yaml"
expect_output "^plan for lenet5 on 4 ranks \\(machine two-by-two of $T/m.yaml: 2 per node;" \
    "its header names the machine and its file"

# bad NAME LOCATION PATTERN DESCRIPTION: the file $T/NAME.yaml (from stdin)
# exits 2 with "FILE:LOCATION: PATTERN".
bad() {
    cat > "$T/$1.yaml"
    expect_status 2 "$4: exit 2" -- $PLAN --machine "$T/$1.yaml"
    expect_output "^dltrain plan: --machine: $T/$1.yaml:$2: $3" "$4: located, naming the key"
}
bad unknown 3:1 "machine: unknown key 'rank_per_node' \\(expected one of: name, nodes, ranks_per_node," \
    "an unknown key" <<'EOF'
nodes: 1
ranks_per_node: 2
rank_per_node: 2
EOF
bad type 1:8 "machine.nodes: expected an integer, found 'two'" "a word for a number" <<'EOF'
nodes: two
ranks_per_node: 2
EOF
bad negative 4:24 "machine.link.bw: expected a rate above 0 such as .*found '-1GB/s'" "a negative rate" <<'EOF'
name: bad
nodes: 2
ranks_per_node: 2
link: {alpha: 5us, bw: -1GB/s}
EOF
bad unit 3:20 "machine.node_link.alpha: expected a time with its unit such as 20us.*found '5'" \
    "a time without its unit" <<'EOF'
nodes: 1
ranks_per_node: 2
node_link: {alpha: 5, bw: 1GB/s}
EOF
bad nolink 1:8 "machine.link: needed when nodes > 1 \\(found nodes: 2\\)" "no link with 2 nodes" <<'EOF'
nodes: 2
ranks_per_node: 2
node_link: {alpha: 5us, bw: 1GB/s}
EOF
bad syntax 2:[0-9]+ "YAML syntax error" "a YAML syntax error" <<'EOF'
nodes: [1, 2
ranks_per_node: 2
EOF
expect_status 2 "a missing file exits 2" -- $PLAN --machine "$T/none.yaml"
expect_output "^dltrain plan: --machine: $T/none.yaml: cannot open" "naming --machine and the file"
bad mapping 3:7 "machine.link: expected a mapping, found a scalar" "a link that is not a mapping" <<'EOF2'
nodes: 2
ranks_per_node: 2
link: 5us
EOF2
bad required 1:1 "machine.ranks_per_node: expected it \\(e.g. ranks_per_node: 8\\), found no such key" \
    "no ranks_per_node" <<'EOF2'
nodes: 2
link: {alpha: 5us, bw: 1GB/s}
EOF2
bad empty 1:1 "machine: expected a mapping with nodes and ranks_per_node, found an empty file" "an empty file" \
    < /dev/null
expect_status 2 "more ranks than the machine has exit 2" -- $PLAN --machine "$T/m.yaml" --ranks 4,8
expect_output "^dltrain plan: --ranks 8: the machine of $T/m.yaml has 4 ranks \\(2 nodes x 2 per node\\)" \
    "naming --ranks, the file and its ranks"
exit $((tap_failed > 0))
