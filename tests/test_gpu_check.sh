#!/bin/sh
# test_gpu_check.sh: tools/gpu-check, the script a lent GPU machine runs
# first (issue 31), cannot rot.  Here, with no GPU: --prepare fetches the
# Debian packages (all of them, within the size that leaves room for the tree
# in a device call's 64 MiB), the Autotools outputs and a Fashion-MNIST
# slice; --dry-run unpacks them, builds --with-cuda with this machine's CUDA
# toolkit against the unpacked libraries (each one loaded from there, not
# from /usr), and trains LeNet-5 on the CPU on the slice.  Skipped where
# there is no nvcc or Debian's archive cannot be reached.
. "$top_srcdir/tests/tap.sh"
T="$TMPDIR_TEST"
SRC=$(cd "$top_srcdir" && pwd)
GC="$SRC/tools/gpu-check"
CUDA_DIR=${CUDA_DIR:-/usr/local/cuda}
if ! [ -x "$CUDA_DIR/bin/nvcc" ]; then
    echo "1..0 # SKIP no CUDA toolkit at $CUDA_DIR (nvcc): the dry run builds --with-cuda"
    exit 0
fi
mkdir -p "$T/probe" && chmod 777 "$T/probe"
if ! (cd "$T/probe" && apt-get download make) > /dev/null 2>&1; then
    echo "1..0 # SKIP Debian's archive cannot be reached (apt-get download make failed): --prepare needs it"
    exit 0
fi
tap_plan 13
export GPU_CHECK_PREP="$T/prep" GPU_CHECK_WORK="$T/work"

# ---------------------------------------------------------------- refusals
expect_status 2 "an unknown option exits 2" -- "$GC" --bogus
expect_output "unknown option '--bogus'" "naming it"
expect_status 2 "with nothing prepared it exits 2" -- "$GC"
expect_output "run tools/gpu-check --prepare where Debian's archive is reachable" "saying what to run where"

# ---------------------------------------------------------------- --prepare
expect_status 0 "--prepare" -- "$GC" --prepare
want=$(sed -n '/^DEBS="/,/"$/p' "$GC" | tr -d '"' | sed 's/^DEBS=//' | wc -w)
got=$(grep -c '\.deb$' "$T/prep/MANIFEST")
[ "$got" -eq "$want" ] && [ "$(ls "$T/prep/debs" | wc -l)" -eq "$want" ]
tap_result $? "every one of the $want packages fetched and listed (got $got)"
tar -tzf "$T/prep/autotools.tar.gz" > "$T/autotools.list" &&
    grep -qx configure "$T/autotools.list" && grep -qx Makefile.in "$T/autotools.list" &&
    grep -qx config.h.in "$T/autotools.list"
tap_result $? "the Autotools outputs travel (the GPU machine has no autoconf)"
# What a device call carries: the tree (tracked and not ignored) and the prepared folder.
if [ "$(git -C "$SRC" rev-parse --show-toplevel 2>/dev/null)" = "$SRC" ]; then
    tree=$(cd "$SRC" && git ls-files -co --exclude-standard -z | xargs -0 du -cb 2>/dev/null | tail -1 | cut -f1)
else   # a copy (tools/mutate's): what the script's own fallback copies
    tree=$(cd "$SRC" && tar -cf - --exclude='./build*' --exclude=./.gpu-check --exclude=./gpu-check-out --exclude=./.git . | wc -c)
fi
prep=$(du -sb "$T/prep" | cut -f1)
echo "# tree ${tree:-?} bytes, prepared $prep bytes"
[ -n "$tree" ] && [ $((tree + prep)) -lt $((60 * 1048576)) ]
tap_result $? "tree and prepared folder fit a device call's 64 MiB with room to spare"

# ---------------------------------------------------------------- --dry-run
expect_status 0 "--dry-run builds with CUDA against the unpacked packages" -- env OUT="$T/out" "$GC" --dry-run --jobs 2
cat "$T/out/report.txt" | sed 's/^/# /'
for s in unpack cuda-libs configure build lenet-cpu; do
    grep -q "^PASS  $s " "$T/out/report.txt" || { echo "# no PASS line for $s"; false; }
done
tap_result $? "the report passes unpack, cuda-libs, configure, build and LeNet-5 on the CPU"
grep -q "^PASS  build .* libraries from the prefix" "$T/out/report.txt"
tap_result $? "dltrain loads the travelled libraries from the prefix (ldd)"
tar -xzf "$T/out/logs.tar.gz" -C "$T" && grep -q "final: test accuracy .*(1000 samples).*after 200 steps" "$T/logs/lenet-cpu.log"
tap_result $? "LeNet-5 trained 200 steps on the travelled Fashion-MNIST slice"
! grep -qE "^(PASS|FAIL|SKIP)  (unit-tests|lenet-cuda|throughput|tune) " "$T/out/report.txt"
tap_result $? "nothing runs on a device in a dry run"
exit $((tap_failed > 0))
