#!/bin/sh
# test_checkpoint_numpy.sh: a dltrain checkpoint is a plain safetensors file:
# Debian's python3 + NumPy (no safetensors package) parse its header, check
# the data checksum with zlib, and read conv1.weight equal to what dltrain
# itself reads.  No export step is needed.
. "${top_srcdir:-.}/tests/tap.sh"
PY=/usr/bin/python3
if ! [ -x "$PY" ] || ! "$PY" -c 'import numpy' 2>/dev/null; then
    echo "1..0 # SKIP /usr/bin/python3 with numpy (Debian python3-numpy) is not installed"
    exit 0
fi
tap_plan 3
F="$TMPDIR_TEST/ckpt.safetensors"
expect_status 0 "ckpt_tool writes a checkpoint" -- "$top_builddir/tests/ckpt_tool" write "$F"
"$top_builddir/tests/ckpt_tool" dump "$F" conv1.weight > "$TMPDIR_TEST/c.txt"
OUT=$("$PY" - "$F" "$TMPDIR_TEST/c.txt" <<'PYEOF' 2>&1
import json, struct, sys, zlib
import numpy as np
path, ref = sys.argv[1], sys.argv[2]
raw = open(path, "rb").read()
(n,) = struct.unpack("<Q", raw[:8])
header = json.loads(raw[8:8 + n])
data = raw[8 + n:]
meta = header.pop("__metadata__")
assert meta["format"] == "dltrain-checkpoint-1", meta
assert meta["dltrain.data_crc32"] == "crc32:%08x" % zlib.crc32(data), "checksum"
info = header["conv1.weight"]
b, e = info["data_offsets"]
w = np.frombuffer(data[b:e], dtype={"F32": np.float32}[info["dtype"]]).reshape(info["shape"])
assert w.shape == (3, 1, 3, 3), w.shape
want = np.loadtxt(ref, dtype=np.float32).reshape(w.shape)
assert np.array_equal(w, want), (w, want)
names = sorted(header)
assert "bn1.running_var" in names and "optim.fc.weight.momentum_buffer" in names, names
print("numpy read %d tensors, conv1.weight %s mean %.6f" % (len(names), w.shape, w.mean()))
PYEOF
)
status=$?
echo "$OUT" | sed 's/^/# /'
tap_result $status "numpy parses the header and conv1.weight equals dltrain's values"
echo "$OUT" | grep -q "numpy read"; tap_result $? "numpy checked the data checksum with zlib.crc32"
[ $tap_failed -eq 0 ]
