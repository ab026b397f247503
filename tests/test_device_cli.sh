#!/bin/sh
# test_device_cli.sh: --device and the network file's train.device.  --device
# cuda is refused with status 2 before any work (the dataset folder given
# does not exist and the metrics file is never made), with a message that
# says what is missing: in a build without --with-cuda, that; in a CUDA
# build, no driver when the system has no libcuda.so.1, otherwise no device
# (a machine with a usable GPU is not expected here: the test says so and
# fails, as --device cuda then runs).  The same for train.device: cuda in
# the file and for dltrain check; --device cpu overrides the file; a device
# the schema does not know is refused.
. "$top_srcdir/tests/tap.sh"
NET="$top_srcdir/nets/lenet5.yaml"
tap_plan 12

if grep -q '^#define DL_HAVE_CUDA 1' "$top_builddir/config.h"; then
    if ldconfig -p 2>/dev/null | grep -q 'libcuda\.so\.1'; then
        MISSING='--device cuda: (no CUDA device|the CUDA driver .* cannot run this build)'
        WHY="a CUDA build on a machine with a driver"
    else
        MISSING='--device cuda: no CUDA driver \(libcuda\) on this machine'
        WHY="a CUDA build on a machine without a driver"
    fi
else
    MISSING='--device cuda: this dltrain was built without --with-cuda'
    WHY="a build without --with-cuda"
fi
echo "# $WHY: expecting /$MISSING/"

NOWHERE="$TMPDIR_TEST/no-such-folder"
expect_status 2 "--device cuda: status 2 ($WHY)" -- \
    "$DLTRAIN" train --net "$NET" --device cuda --data "$NOWHERE" --metrics "$TMPDIR_TEST/m.jsonl"
expect_output "^dltrain: $MISSING" "--device cuda: the message says what is missing"
[ ! -e "$TMPDIR_TEST/m.jsonl" ] && [ ! -e "$TMPDIR_TEST/m.jsonl.partial" ]
tap_result $? "--device cuda: refused before the metrics file is made"
echo "$OUT" | grep -q "$NOWHERE"
[ $? -ne 0 ]; tap_result $? "--device cuda: refused before the dataset is read"

sed 's/^train:$/train:\n  device: cuda/' "$NET" > "$TMPDIR_TEST/cuda.yaml"
grep -q '^  device: cuda' "$TMPDIR_TEST/cuda.yaml"; tap_result $? "the network file names train.device: cuda"
expect_status 2 "train.device: cuda in the file: status 2" -- \
    "$DLTRAIN" train --net "$TMPDIR_TEST/cuda.yaml" --data "$NOWHERE"
expect_output "^dltrain: $MISSING" "train.device: cuda: the same message"
expect_status 2 "dltrain check --device cuda: status 2" -- "$DLTRAIN" check --net "$NET" --device cuda
expect_output "^dltrain check: $MISSING" "dltrain check --device cuda: the same message"

expect_status 0 "--device cpu overrides train.device: cuda (dltrain check)" -- \
    "$DLTRAIN" check --net "$TMPDIR_TEST/cuda.yaml" --device cpu

sed 's/^train:$/train:\n  device: gpu/' "$NET" > "$TMPDIR_TEST/gpu.yaml"
expect_status 2 "train.device: gpu: status 2" -- "$DLTRAIN" check --net "$TMPDIR_TEST/gpu.yaml"
expect_output 'train.*device.*(cpu, cuda|cpu.*cuda).*gpu' "train.device: gpu: the message names the key, the choices and the value"
