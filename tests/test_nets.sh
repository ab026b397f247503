#!/bin/sh
# test_nets.sh: the shipped network files (nets/*.yaml).  Every one passes
# `dltrain check` with the exact trainable-parameter count of the reference
# model (torchvision's for the ImageNet nets), resnet50.yaml stays short
# thanks to blocks with repeat and first, and the layers that hold parameters
# carry torchvision's state_dict names, so a checkpoint maps one-to-one.  The
# example network of dltrain-net(5) is valid too, and the page's LAYER TYPES
# section matches what tools/gen-layer-doc generates from the binary.
# Prints TAP; needs $top_builddir (the dltrain binary) and $top_srcdir.
: "${top_builddir:=.}"
: "${top_srcdir:=.}"
DLTRAIN="$top_builddir/dltrain"
NETS="$top_srcdir/nets"
TMP=$(mktemp -d "${TMPDIR:-/tmp}/dltrain-nets.XXXXXX") || exit 1
trap 'rm -rf "$TMP"' EXIT

n=0
failed=0
result() { # result STATUS DESCRIPTION
    n=$((n + 1))
    if [ "$1" -eq 0 ]; then
        echo "ok $n - $2"
    else
        echo "not ok $n - $2"
        failed=$((failed + 1))
    fi
}

echo "1..22"

# ------------------------------------------------ check and parameter counts
# name expected-count (torchvision: sum(p.numel() for p in model.parameters()))
while read -r net want; do
    out="$TMP/$net.out"
    "$DLTRAIN" check --net "$NETS/$net.yaml" >"$out" 2>&1
    rc=$?
    if [ $rc -ne 0 ]; then
        echo "# dltrain check --net nets/$net.yaml exited with status $rc:"
        head -5 "$out" | sed 's/^/#   /'
    fi
    result $rc "dltrain check --net nets/$net.yaml succeeds"
    got=$(sed -n 's/^total: \([0-9]*\) trainable parameters.*/\1/p' "$out")
    [ "$got" = "$want" ]
    st=$?
    [ $st -ne 0 ] && echo "# nets/$net.yaml: ${got:-no total} trainable parameters, expected $want"
    result $st "$net has $want trainable parameters"
done <<'EOF'
lenet5 61706
mlp 669706
alexnet 61100840
vgg16 138357544
resnet18 11689512
resnet50 25557032
EOF

# ------------------------------------------------ resnet50.yaml is short
lines=$(wc -l <"$NETS/resnet50.yaml")
[ "$lines" -lt 200 ]
st=$?
[ $st -ne 0 ] && echo "# resnet50.yaml has $lines lines"
result $st "resnet50.yaml has fewer than 200 lines ($lines)"

# ------------------------------------------------ torchvision names
# Names of the layers with trainable parameters, from a check table (rows
# start with the layer index; column 2 is the name, column 6 the count).
param_layers() {
    awk '$1 ~ /^[0-9]+$/ && $7 > 0 { print $2 }' "$TMP/$1.out" | sort
}

# compare NET DESCRIPTION: param_layers NET against the names on stdin (run
# with a redirection, not in a pipeline, so that the counters stay in this shell).
compare() {
    sort >"$TMP/$1.want"
    param_layers "$1" >"$TMP/$1.got"
    if cmp -s "$TMP/$1.want" "$TMP/$1.got"; then
        result 0 "$2"
    else
        echo "# parameter layers of $1 differ from torchvision's (< expected, > found):"
        diff "$TMP/$1.want" "$TMP/$1.got" | grep '^[<>]' | head -20 | sed 's/^/#   /'
        result 1 "$2"
    fi
}

# resnet_names KIND BLOCKS...: torchvision's module names with parameters.
resnet_names() {
    kind=$1
    shift
    echo conv1
    echo bn1
    stage=1
    for blocks in "$@"; do
        b=0
        while [ $b -lt "$blocks" ]; do
            p="layer$stage.$b"
            if [ "$kind" = bottleneck ]; then
                printf '%s\n' "$p.conv1" "$p.bn1" "$p.conv2" "$p.bn2" "$p.conv3" "$p.bn3"
            else
                printf '%s\n' "$p.conv1" "$p.bn1" "$p.conv2" "$p.bn2"
            fi
            if [ $b -eq 0 ] && { [ "$kind" = bottleneck ] || [ $stage -gt 1 ]; }; then
                printf '%s\n' "$p.downsample.0" "$p.downsample.1"
            fi
            b=$((b + 1))
        done
        stage=$((stage + 1))
    done
    echo fc
}

resnet_names bottleneck 3 4 6 3 >"$TMP/resnet50.names"
resnet_names basic 2 2 2 2 >"$TMP/resnet18.names"
printf '%s\n' features.0 features.3 features.6 features.8 features.10 \
    classifier.1 classifier.4 classifier.6 >"$TMP/alexnet.names"
printf '%s\n' features.0 features.2 features.5 features.7 features.10 features.12 features.14 \
    features.17 features.19 features.21 features.24 features.26 features.28 \
    classifier.0 classifier.3 classifier.6 >"$TMP/vgg16.names"
compare resnet50 "resnet50: every layer with parameters has its torchvision name" <"$TMP/resnet50.names"
compare resnet18 "resnet18: every layer with parameters has its torchvision name" <"$TMP/resnet18.names"
compare alexnet "alexnet: features.N and classifier.N as in torchvision" <"$TMP/alexnet.names"
compare vgg16 "vgg16: features.N and classifier.N as in torchvision" <"$TMP/vgg16.names"

# A few names spelled out, so that a failure reads plainly.
param_layers resnet50 >"$TMP/resnet50.got"
for name in layer4.2.conv3 layer3.0.downsample.0 layer1.0.downsample.1; do
    grep -qx "$name" "$TMP/resnet50.got"
    result $? "resnet50 has a layer named $name"
done

# ------------------------------------------------ the manual page
MAN="$top_srcdir/man/dltrain-net.5"
# The EXAMPLE section's network, un-escaped from roff.
sed -n '/^\.\\" BEGIN EXAMPLE/,/^\.\\" END EXAMPLE/p' "$MAN" | sed -e '/^\./d' \
    -e 's/\\-/-/g' -e "s/\\\\(aq/'/g" -e 's/\\&//g' -e 's/\\e/\\/g' >"$TMP/example.yaml"
"$DLTRAIN" check --net "$TMP/example.yaml" >"$TMP/example.out" 2>&1
st=$?
if [ $st -ne 0 ] || ! grep -q '^total: 42858 trainable parameters' "$TMP/example.out"; then
    st=1
    head -3 "$TMP/example.out" | sed 's/^/#   /'
fi
result $st "the example of dltrain-net(5) is a valid network of 42858 parameters"

# The generated LAYER TYPES section is current: regenerate it and compare.
sed -n '/^\.\\" BEGIN LAYER TYPES/,/^\.\\" END LAYER TYPES/p' "$MAN" >"$TMP/layers.have"
if sh "$top_srcdir/tools/gen-layer-doc" "$DLTRAIN" - >"$TMP/layers.want" 2>"$TMP/layers.err" &&
    cmp -s "$TMP/layers.have" "$TMP/layers.want"; then
    result 0 "dltrain-net(5) documents every layer type and key as dltrain help layers prints them"
else
    echo "# man/dltrain-net.5 is out of date: run tools/gen-layer-doc ./dltrain man/dltrain-net.5"
    diff "$TMP/layers.have" "$TMP/layers.want" | head -10 | sed 's/^/#   /'
    sed 's/^/#   /' "$TMP/layers.err"
    result 1 "dltrain-net(5) documents every layer type and key as dltrain help layers prints them"
fi

[ "$n" -eq 22 ] || echo "# ran $n tests, planned 22"
[ $failed -eq 0 ]
