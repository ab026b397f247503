#!/bin/sh
# test_first_run.sh: what a new user meets in the first ten minutes.
# - Shipped names (--net NAME, --dataset NAME, --machine NAME) resolve from
#   any folder; a miss lists the folders searched and exits 2; a copy of the
#   binary outside its build tree does not look in the source tree.
# - --version names the commit (git's) and the libraries compiled in, as
#   their own tools report them (mpirun --version, dpkg).
# - --set KEY=VALUE on every key of the network-file schema: a good value
#   has the effect the same key in the file has (check's settings and
#   layer table, with the file written by PyYAML), a bad one the file's
#   message after the location; keys the optimizer or schedule does not use
#   warn from the file and are refused from the command line.
# - --resume FILE without '='; "did you mean" for options and commands;
#   --help lists every command, testing aids stay out of it.
# - check is a preflight: every refusal exits 2 with nothing on stdout.
. "$top_srcdir/tests/tap.sh"
T="$TMPDIR_TEST"
tap_plan 58
SRC=$(cd "$top_srcdir" && pwd)

# ---------------------------------------------------------------- names from any folder
mkdir -p "$T/elsewhere"
expect_status 0 "--net lenet5 from another folder" -- sh -c "cd '$T/elsewhere' && '$DLTRAIN' check --net lenet5"
expect_output "^network lenet5 \($SRC/nets/lenet5.yaml\)" "found in the source tree of the binary"
expect_status 0 "--dataset fashion-mnist and --machine from another folder" -- sh -c \
    "cd '$T/elsewhere' && '$DLTRAIN' check --net mlp --dataset fashion-mnist && '$DLTRAIN' plan --net mlp --machine v100-25gbit --ranks 8 --no-db"
expect_output "machine v100-25gbit of $SRC/machines/v100-25gbit.yaml" "the machine file found there too"
expect_status 2 "a name that is nowhere exits 2" -- sh -c "cd '$T/elsewhere' && '$DLTRAIN' check --net lenet7"
expect_output "--net lenet7: no such file here, and no shipped network lenet7.yaml in $SRC/nets, .*/nets, \./nets" \
    "listing the folders searched"
expect_status 2 "a dataset that is nowhere exits 2" -- "$DLTRAIN" check --net lenet5 --dataset fashoin-mnist
expect_output "no dataset file fashoin-mnist.yaml \(looked in $SRC/datasets, " "listing the folders searched"
mkdir -p "$T/bin" && cp "$DLTRAIN" "$T/bin/dltrain"
expect_status 2 "a copy outside the build tree does not look in the source tree" -- \
    sh -c "cd '$T/elsewhere' && '$T/bin/dltrain' check --net lenet5"
echo "$OUT" | grep -q "$SRC/nets"; [ $? -ne 0 ]; tap_result $? "its message does not list the source tree"
expect_status 0 "the copy with DLTRAIN_DATADIR finds it" -- \
    sh -c "cd '$T/elsewhere' && DLTRAIN_DATADIR='$SRC' '$T/bin/dltrain' check --net lenet5"

# ---------------------------------------------------------------- --version
expect_status 0 "--version" -- "$DLTRAIN" --version
if head=$(git -C "$SRC" rev-parse --short=12 HEAD 2>/dev/null); then
    echo "$OUT" | grep -q "^commit: $head"
else
    echo "$OUT" | grep -q "^commit: unknown"
fi
tap_result $? "names the commit it was built from (${head:-no git})"
ok=0
if grep -q '^#define DL_HAVE_MPI 1' "$top_builddir/config.h" && command -v mpirun >/dev/null; then
    v=$(mpirun --version 2>/dev/null | sed -n 's/.*(Open MPI) \([0-9.]*\).*/\1/p' | head -1)
    [ -n "$v" ] && echo "$OUT" | grep -q "^communication: mpi (Open MPI v$v), self" || ok=1
else
    echo "$OUT" | grep -q "^communication: self$" || ok=1
fi
[ $ok -eq 0 ]; tap_result $? "the MPI library as mpirun --version reports it"
dnnl=$(dpkg-query -W -f '${Version}' libdnnl-dev 2>/dev/null | cut -d- -f1)
blas=$(dpkg-query -W -f '${Version}' libopenblas-dev 2>/dev/null | sed 's/^[0-9]*://; s/[-+].*//')
{ [ -z "$dnnl" ] || echo "$OUT" | grep -q "^kernels: .*onednn $dnnl"; } &&
    { [ -z "$blas" ] || echo "$OUT" | grep -q "^kernels: .*OpenBLAS $blas"; } &&
    echo "$OUT" | grep -Eq "^devices: cpu, emulated; (CUDA: not built|CUDA runtime [0-9])"
tap_result $? "oneDNN ($dnnl) and OpenBLAS ($blas) as dpkg knows them, and the devices"

# ---------------------------------------------------------------- --set on every key
cat > "$T/base.yaml" <<'YAML'
name: base
input: {shape: [1, 28, 28], classes: 10}
data: {dataset: synthetic, train_samples: 256, test_samples: 64}
layers:
  - {name: conv1, type: conv, filters: 6, kernel: 5, pad: 2}
  - {name: relu1, type: relu}
  - {name: pool1, type: maxpool, kernel: 2, stride: 2}
  - {name: fc1, type: fc, units: 32}
  - {name: fc2, type: fc, units: 10}
loss: softmax_cross_entropy
train:
  batch: 16
  optimizer: {type: sgd, lr: 0.01}
YAML
FM=/usr/share/datasets/fashion-mnist
IDX="data.dataset=idx;data.train_labels=$FM/train-labels-idx1-ubyte.gz;data.test_images=$FM/t10k-images-idx3-ubyte.gz;data.test_labels=$FM/t10k-labels-idx1-ubyte.gz"
FOLDER="data.dataset=imagefolder;data.dir=$T"
# KEY|GOOD|BAD (- where every value is good)|PRE (;-separated sets before it)|1 when the good value shows in
# check's output
cat > "$T/keys" <<KEYS
name|other|[1, 2]||1
description|[a network, {of: layers}]|-||0
input.shape|[1, 32, 32]|[1, 2, 3, 4]||1
input.classes|12|1|layers.fc2.units=12|1
data.dataset|fashion-mnist|nope||1
data.dir|$T|[1]|data.dataset=cifar10;input.shape=[3, 32, 32]|1
data.train_images|$FM/train-images-idx3-ubyte.gz|[1]|$IDX|1
data.train_labels|$FM/train-labels-idx1-ubyte.gz|[1]|$IDX;data.train_images=$FM/train-images-idx3-ubyte.gz;data.train_labels=x|1
data.train_samples|100|0||1
data.test_samples|50|0||1
data.normalize|false|maybe||1
data.mean|[0.5, 0.4, 0.3]|[1]|data.std=[0.2, 0.2, 0.2]|1
data.std|[0.3, 0.2, 0.1]|[0, 1, 1]|data.mean=[0.5, 0.5, 0.5]|1
data.threads|3|0||1
data.prefetch|4|0||1
data.bad_samples|fail|never||1
data.limit_train|100|0||1
data.limit_test|50|x||1
data.train.crop|center|square|$FOLDER|1
data.train.scale|[0.5, 1]|[2, 1]|$FOLDER|1
data.train.ratio|[0.5, 2]|[1]|$FOLDER|1
data.train.resize|1.5|100|$FOLDER|1
data.eval.flip|true|2|$FOLDER|1
train.batch|32|0||1
train.epochs|5|0||1
train.max_steps|7|-1||1
train.seed|9|-1||1
train.device|emulated|tpu||1
train.clip_grad_norm|1.5|-1||1
train.lr_scaling|linear|cube|train.reference_batch=16|1
train.reference_batch|128|0|train.lr_scaling=sqrt;train.reference_batch=16|1
train.optimizer.type|adagrad|sgdd||1
train.optimizer.lr|0.5|-1||1
train.optimizer.momentum|0.5|1.5||1
train.optimizer.nesterov|true|3|train.optimizer.momentum=0.9|1
train.optimizer.weight_decay|0.001|-1||1
train.optimizer.no_decay|[bias, embedding]|[bias, weights]||1
train.optimizer.beta1|0.8|1.5|train.optimizer.type=adam|1
train.optimizer.beta2|0.95|2|train.optimizer.type=adamw|1
train.optimizer.alpha|0.9|2|train.optimizer.type=rmsprop|1
train.optimizer.eps|0.001|0|train.optimizer.type=adam|1
train.optimizer.trust_coefficient|0.01|0|train.optimizer.type=lars|1
train.schedule.type|cosine|linear||1
train.schedule.step_epochs|10|0|train.schedule.type=step|1
train.schedule.gamma|0.5|2|train.schedule.type=step|1
train.schedule.min_lr|0.001|-1|train.schedule.type=cosine|1
train.schedule.warmup_epochs|2|-1||1
parallel.strategy|pipeline|fast||1
parallel.dp|2|0||1
parallel.tp|2|0||1
parallel.pp|2|0||1
parallel.micro_batches|4|0||1
parallel.stages|[fc1]|fc1|parallel.pp=2|1
parallel.sequence_parallel|true|often||1
parallel.zero|1|4||1
loss.label_smoothing|0.1|2||0
layers.fc1.units|48|0||1
layers.conv1.pad|0|-1||1
layers.pool1.kernel|[2, 1]|0||1
KEYS
good=0 bad=0 nobad=0 visible=0 rows=0 fails=""
IFS_SAVE=$IFS
while IFS='|' read -r key goodv badv pre shows; do
    rows=$((rows + 1))
    set --
    IFS=';'
    for p in $pre; do set -- "$@" --set "$p"; done
    IFS=$IFS_SAVE
    # the file: base with PRE and KEY=GOOD (PyYAML), and with KEY=BAD
    (IFS=';'; /usr/bin/python3 "$top_srcdir/tests/set_keys.py" "$T/base.yaml" "$T/good.yaml" $pre "$key=$goodv") &&
        (IFS=';'; /usr/bin/python3 "$top_srcdir/tests/set_keys.py" "$T/base.yaml" "$T/bad.yaml" $pre "$key=$badv") &&
        (IFS=';'; /usr/bin/python3 "$top_srcdir/tests/set_keys.py" "$T/base.yaml" "$T/pre.yaml" $pre) ||
        { fails="$fails $key(set_keys.py)"; continue; }
    "$DLTRAIN" check --net "$T/good.yaml" > "$T/file.out" 2>/dev/null; s1=$?
    "$DLTRAIN" check --net "$T/base.yaml" "$@" --set "$key=$goodv" > "$T/set.out" 2>/dev/null; s2=$?
    "$DLTRAIN" check --net "$T/pre.yaml" > "$T/pre.out" 2>/dev/null
    if [ $s1 -eq 0 ] && [ $s2 -eq 0 ] && [ "$(tail -n +2 "$T/file.out")" = "$(tail -n +2 "$T/set.out")" ]; then
        good=$((good + 1))
    else
        fails="$fails $key=$goodv(good:$s1,$s2)"
    fi
    if [ "$shows" = 1 ]; then
        if [ "$(tail -n +2 "$T/pre.out")" != "$(tail -n +2 "$T/set.out")" ] || [ "$(head -1 "$T/pre.out")" != "$(head -1 "$T/set.out" | sed "s|(.*)|($T/pre.yaml)|")" ]; then
            visible=$((visible + 1))
        else
            fails="$fails $key=$goodv(no-effect)"
        fi
    fi
    if [ "$badv" = - ]; then
        nobad=$((nobad + 1))
        continue
    fi
    "$DLTRAIN" check --net "$T/bad.yaml" > /dev/null 2> "$T/file.err"; s1=$?
    "$DLTRAIN" check --net "$T/base.yaml" "$@" --set "$key=$badv" > /dev/null 2> "$T/set.err"; s2=$?
    m1=$(grep -v warning "$T/file.err" | sed "s|^dltrain check: $T/bad.yaml:[0-9]*:[0-9]*: ||")
    m2=$(grep -v warning "$T/set.err" | sed "s|^dltrain check: --set $key=[^:]*: ||")
    if [ $s1 -eq 2 ] && [ $s2 -eq 2 ] && [ -n "$m1" ] && [ "$m1" = "$m2" ]; then
        bad=$((bad + 1))
    else
        fails="$fails $key=$badv(bad:$s1,$s2)"
        echo "# file: $m1"
        echo "# --set: $m2"
    fi
done < "$T/keys"
shown=$(grep -c '|1$' "$T/keys")
echo "# rows $rows: good $good, bad $bad, visible $visible of $shown;$fails"
[ "$good" -eq "$rows" ]; tap_result $? "--set KEY=GOOD on all $rows keys: the same check output as the key in the file"
[ "$visible" -eq "$shown" ]; tap_result $? "and every one of them ($shown) that check prints changes its output"
[ "$bad" -eq $((rows - nobad)) ]
tap_result $? "--set KEY=BAD on all $((rows - nobad)) keys with a bad value: exit 2 and the file's message"

# --dataset names another dataset than the file's: the file's folder for its own dataset goes with it
/usr/bin/python3 "$top_srcdir/tests/set_keys.py" "$T/base.yaml" "$T/cifar.yaml" data.dataset=cifar10 "data.dir=$T"
expect_status 0 "--dataset fashion-mnist on a file with cifar10 and its folder" -- \
    "$DLTRAIN" check --net "$T/cifar.yaml" --dataset fashion-mnist
expect_output "data: dataset fashion-mnist \(format fashion-mnist\), dir '/usr/share/datasets/fashion-mnist'," \
    "drops the file's folder for cifar10 (the dataset file's own instead)"

# The token keys, on the bigram model: --set as the file, good and bad
printf 'some text to make a few windows of sixty-four bytes out of, and then some more of it, and more.\n%.0s' $(seq 1 40) > "$T/text.txt"
/usr/bin/python3 "$top_srcdir/tests/set_keys.py" "$top_srcdir/nets/bigram.yaml" "$T/val.yaml" data.validation=0.25
"$DLTRAIN" check --net "$T/val.yaml" --data "$T/text.txt" > "$T/val.file" 2> "$T/val.file.err"
"$DLTRAIN" check --net bigram --data "$T/text.txt" --set data.validation=0.25 > "$T/val.set" 2> "$T/val.set.err"
[ "$(tail -n +2 "$T/val.file")" = "$(tail -n +2 "$T/val.set")" ] && grep -q "validation 0.25" "$T/val.set"
tap_result $? "--set data.validation as in the file, and shown"
expect_status 2 "--set data.validation out of range" -- "$DLTRAIN" check --net bigram --data "$T/text.txt" --set data.validation=1.5
expect_output "data.validation: expected a number in \[0.001, 0.999\], found 1.5" "the file's message"
expect_status 2 "--set input.dtype=f32 on the bigram model" -- "$DLTRAIN" check --net bigram --data "$T/text.txt" --set input.dtype=f32
expect_output "layer 'wte' \\(embedding\\): expected token ids \\[T\\] \\(i32\\), found 64" "the embedding then refuses it"

expect_status 2 "--set without '='" -- "$DLTRAIN" check --net lenet5 --set train.batch
expect_output "--set: expected KEY=VALUE" "says what it expects"
expect_status 2 "--set on a layer that is not there" -- "$DLTRAIN" check --net lenet5 --set layers.conv9.filters=3
expect_output "no item named 'conv9'" "names the missing item"
expect_status 2 "--set below a scalar" -- "$DLTRAIN" check --net lenet5 --set train.batch.size=3
expect_output "train.batch.size.*is a scalar" "says where the path left the document"

# ---------------------------------------------------------------- anchors, aliases and tags
# refused in --set values, dataset and machine files as in network files
# (test_netfile), with the place; description takes any value.
printf 'format: synthetic\nclasses: !!int 10\n' > "$T/tagged.yaml"
printf '&m\nnodes: 1\n' > "$T/anchored.yaml"
for c in "check --net lenet5 --set layers.fc1.units=!!str|--set layers.fc1.units=!!str:1:1: expected a plain value, found the YAML tag !!str" \
    "check --net lenet5 --set layers.fc1.units=*u|--set layers.fc1.units=*u:1:1: expected a plain value, found the YAML alias *u" \
    "check --net lenet5 --dataset $T/tagged.yaml|tagged.yaml:2:10: expected a plain value, found the YAML tag !!int" \
    "plan --net lenet5 --machine $T/anchored.yaml|anchored.yaml:1:1: expected a plain value, found the YAML anchor &m"; do
    # shellcheck disable=SC2086 # words on purpose
    "$DLTRAIN" ${c%%|*} >/dev/null 2>"$T/props.err"; got=$?
    [ "$got" -eq 2 ] && grep -qF -- "${c#*|}" "$T/props.err"
    tap_result $? "${c%%|*}: status 2 and '${c#*|}'" || sed 's/^/#   /' "$T/props.err"
done
"$DLTRAIN" check --net lenet5 --set 'description=[a list, {b: c}]' >/dev/null 2>"$T/props.err"
tap_result $? "--set description to a list of a mapping: accepted"

# ---------------------------------------------------------------- keys that do not apply
expect_status 0 "the file's momentum with --optimizer adam: a warning" -- "$DLTRAIN" check --net lenet5 --optimizer adam
expect_output "warning: .*nets/lenet5.yaml:[0-9]+:[0-9]+: train.optimizer.momentum: adam does not use it \(sgd, rmsprop, lars and muon do\); ignored" \
    "naming the key and where it is"
expect_status 2 "--set train.optimizer.beta2 with sgd is refused" -- "$DLTRAIN" check --net lenet5 --set train.optimizer.beta2=0.95
expect_output "train.optimizer.beta2: sgd does not use it \(adam, adamw, lamb and muon do\)" "saying who does"
expect_status 2 "--momentum with --optimizer adam is refused" -- "$DLTRAIN" check --net lenet5 --optimizer adam --momentum 0.9

# ---------------------------------------------------------------- options
"$DLTRAIN" --net lenet5 --max-steps 2 --limit-test 64 --quiet --checkpoint-dir "$T/ck" --checkpoint-every 1 > /dev/null 2>&1
expect_status 0 "--resume FILE without '='" -- "$DLTRAIN" --net lenet5 --max-steps 3 --limit-test 64 \
    --resume "$T/ck/ckpt-0000000002.safetensors"
expect_output "resuming from .*ckpt-0000000002.safetensors: step 2" "resumes from that file"
expect_status 2 "a misspelled option" -- "$DLTRAIN" --net lenet5 --momentun 0.9
expect_output "unrecognized option '--momentun' \(did you mean --momentum\?\)" "suggests the option meant"
expect_status 2 "a misspelled command" -- "$DLTRAIN" chekc --net lenet5
expect_output "unknown command 'chekc' \(did you mean check\?\)" "suggests the command meant"
expect_status 0 "--help" -- "$DLTRAIN" --help
missing=""
for c in "train" "check" "tune" "plan" "bench step" "bench conv" "bench comm" "bench data" "bench pipeline" "help layers"; do
    echo "$OUT" | grep -q "dltrain $c \|dltrain \[$c\]" || missing="$missing '$c'"
done
[ -z "$missing" ]; tap_result $? "--help lists every command${missing:+ (missing:$missing)}"
"$DLTRAIN" train --help > "$T/train-help" 2>&1
debug=$(sed -n 's/.*[{(]"\(debug-[a-z-]*\)".*/\1/p' "$top_srcdir/src/cli/train.c")
undocumented=""
for d in $debug; do grep -q -- "--$d" "$top_srcdir/doc/testing.md" || undocumented="$undocumented $d"; done
[ -n "$debug" ] && ! grep -q -- "--debug-[a-z]" "$T/train-help" && [ -z "$undocumented" ]
tap_result $? "the testing aids ($(echo $debug)) are out of train --help and in doc/testing.md${undocumented:+ (not:$undocumented)}"
twice=$("$DLTRAIN" help layers | grep -c 'integer or \[h, w\].*integer or \[h, w\]')
[ "$twice" -eq 0 ]; tap_result $? "help layers says 'integer or [h, w]' once per key ($twice lines say it twice)"

# ---------------------------------------------------------------- check refuses
# refused NAME PATTERN ARGS...: check exits 2, says PATTERN on stderr, prints nothing on stdout
refused() {
    desc=$1 pat=$2
    shift 2
    "$DLTRAIN" check "$@" > "$T/out" 2> "$T/err"; st=$?
    [ $st -eq 2 ] && grep -Eq -- "$pat" "$T/err" && [ ! -s "$T/out" ] ||
        { echo "# status $st, stdout $(wc -l < "$T/out") lines:"; sed 's/^/#   /' "$T/err" | head -3; false; }
    tap_result $? "check refuses $desc"
}
# (oneDNN's Winograd convolution refuses that batch; it exists on AVX-512 CPUs only, and on
# AVX2 CPUs every kernel plans it, so check refuses it for the machine's memory instead)
if grep -qw avx512f /proc/cpuinfo; then
    refused "a batch the kernels cannot plan (naming the layer)" "memory of batch 16000000 cannot be planned: layer '" \
        --net vgg16 --batch 16000000
else
    refused "a batch the kernels cannot plan (naming the layer) # SKIP no kernel refuses it without AVX-512 (the memory does)" \
        "planned peak, [0-9.]+ PiB per process at batch 16000000, exceeds this machine's memory" --net vgg16 --batch 16000000
fi
refused "a plan larger than this machine's memory (in GiB)" "planned peak, [0-9.]+ GiB per process at batch 4096, exceeds this machine's memory \([0-9.]+ GiB\)" \
    --net vgg16 --batch 4096
refused "a plan larger than --memory-per-rank" "exceeds --memory-per-rank \(1.00 MiB\)" --net lenet5 --memory-per-rank 1M
refused "a grid rank over --memory-per-rank" "per rank at batch 64, exceeds --memory-per-rank \(100 KiB\)" \
    --net lenet5 --grid tp=2,pp=2 --memory-per-rank 100K
refused "a dataset with more classes than the network" "cifar100: the dataset has 100 classes but the network only 10 outputs" \
    --net lenet5 --dataset cifar100
refused "a dataset of another shape" "the network's input is 3x224x224 but the images are 3x32x32" \
    --net resnet18 --dataset cifar10 --data "$T"
refused "a bad grid, before the layer table" "tp must be a positive integer" --net lenet5 --grid tp=0
