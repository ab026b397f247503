#!/bin/sh
# test_cpu_matrix.sh: the suite's representative commands on the CPUs of our
# kind, emulated on this one, so that a bug that only one kind shows is
# caught on any machine (issue 40: an OpenBLAS notice on stderr broke every
# test that compared merged output, on Intel Xeons only).  Each command runs
# under five environments:
#   default     whatever the machine has set;
#   unset       OPENBLAS_CORETYPE unset: OpenBLAS's own detection;
#   misdetected OPENBLAS_CORETYPE unset and DLTRAIN_TEST_OPENBLAS_DETECTED=
#               Prescott: dltrain takes OpenBLAS's choice for a misdetection,
#               sets the core and executes itself again, as on an Ice Lake;
#   forced      OPENBLAS_CORETYPE=Prescott: a core this CPU does not report
#               (SSE3 kernels), which dltrain must respect;
#   avx2        ONEDNN_MAX_CPU_ISA=AVX2: an AVX2-only machine (no AVX-512, no
#               native bf16: the emulated bf16 path).
# Must not depend on the CPU, byte for byte: a plan with --flops (JSON), the
# layer table and settings of check (its planned peak depends on the kernels
# chosen), refusals (exit 2, the message, nothing on stdout).  Within their
# arithmetic tolerances: LeNet-5 (default kernels, and OpenBLAS's), GPT-tiny
# (also with its fc layers' positions as one matrix, dnnl-gemm-rows) and
# GPT-tiny in bf16, every step's loss and the test loss against the
# default environment's.  A successful command prints nothing on stderr but
# "dltrain: warning:" lines (the emulated bf16 path warns that it is slow).
. "$top_srcdir/tests/tap.sh"
T="$TMPDIR_TEST"
N="$top_srcdir/nets"
ENVS="default unset misdetected forced avx2"
tap_plan 62

# in_env ENV COMMAND...: runs COMMAND under environment ENV.
in_env() {
    e=$1; shift
    set -- env -u DLTRAIN_OPENBLAS_CHECKED -u DLTRAIN_OPENBLAS_FIXED "$@"
    case $e in
    default) "$@" ;;
    unset) env -u OPENBLAS_CORETYPE -u DLTRAIN_TEST_OPENBLAS_DETECTED "$@" ;;
    misdetected) env -u OPENBLAS_CORETYPE DLTRAIN_TEST_OPENBLAS_DETECTED=Prescott "$@" ;;
    forced) env -u DLTRAIN_TEST_OPENBLAS_DETECTED OPENBLAS_CORETYPE=Prescott "$@" ;;
    avx2) env ONEDNN_MAX_CPU_ISA=AVX2 "$@" ;;
    esac
}

# quiet ERRFILE: nothing on stderr but warnings.
quiet() {
    if grep -v '^dltrain: warning: ' "$1" | grep -q .; then
        echo "# on stderr:"; sed 's/^/#   /' "$1" | head -5
        return 1
    fi
}

# runs NAME WANT COMMAND...: COMMAND in every environment, stdout to
# T/ENV-NAME.out, stderr to T/ENV-NAME.err, the metrics it writes to
# T/metrics.jsonl to T/ENV-NAME.jsonl; one result per environment: the exit
# status is WANT, and with WANT 0 stderr is quiet.
runs() {
    name=$1; want=$2; shift 2
    for e in $ENVS; do
        rm -f "$T/metrics.jsonl"
        in_env "$e" "$@" > "$T/$e-$name.out" 2> "$T/$e-$name.err"
        got=$?
        [ ! -f "$T/metrics.jsonl" ] || mv "$T/metrics.jsonl" "$T/$e-$name.jsonl"
        ok=0
        [ "$got" -eq "$want" ] || { echo "# exit status $got, expected $want"; sed 's/^/#   /' "$T/$e-$name.err" | head -5; ok=1; }
        if [ "$want" -eq 0 ]; then
            quiet "$T/$e-$name.err" || ok=1
            tap_result $ok "$e: $name exits 0, nothing but warnings on stderr"
        else
            tap_result $ok "$e: $name exits $want"
        fi
    done
}

# same NAME SUFFIX [FILTER]: the T/ENV-NAME.SUFFIX of the environments
# $SAME (default: all) through FILTER (a sed script) equal the default's,
# byte for byte.
same() {
    bad=""
    for e in ${SAME:-$ENVS}; do
        sed "${3:-}" "$T/$e-$1.$2" > "$T/$e-$1.$2.cmp"
        cmp -s "$T/default-$1.$2.cmp" "$T/$e-$1.$2.cmp" || bad="$bad $e"
    done
    [ -z "$bad" ] || { echo "# differs from the default's in:$bad"; diff "$T/default-$1.$2.cmp" "$T/${bad##* }-$1.$2.cmp" | head -6 | sed 's/^/#   /'; }
    [ -z "$bad" ]
}

# close NAME TOLERANCE: every step's loss and every test loss in the metrics
# T/ENV-NAME.jsonl within TOLERANCE (relative) of the default's, same count.
close() {
    /usr/bin/python3 - "$T" "$1" "$2" $ENVS <<'PY'
import json, sys
T, name, tol, envs = sys.argv[1], sys.argv[2], float(sys.argv[3]), sys.argv[4:]
def losses(e):
    out = []
    for line in open("%s/%s-%s.jsonl" % (T, e, name)):
        r = json.loads(line)
        if r["event"] in ("step", "epoch"):
            out += [r[k] for k in ("loss", "test_loss") if k in r]
    return out
base = losses("default")
worst = 0.0
for e in envs:
    got = losses(e)
    if len(got) != len(base) or not base:
        print("# %s: %d losses, the default %d" % (e, len(got), len(base)))
        sys.exit(1)
    for a, b in zip(base, got):
        worst = max(worst, abs(a - b) / max(abs(a), 1e-30))
print("# %s: %d losses, largest relative difference %.3g (tolerance %.3g)" % (name, len(base), worst, tol))
sys.exit(0 if worst <= tol else 1)
PY
}

# The correction is real: misdetected runs the core dltrain set, and says why
# only when asked (--version); forced runs the core it was given.
in_env misdetected "$DLTRAIN" --version > "$T/misdetected-version" 2> "$T/misdetected-version.err"
grep -q "^OpenBLAS core: .* (OPENBLAS_CORETYPE=[A-Za-z]* set by dltrain: OpenBLAS took this CPU for a Prescott)$" \
    "$T/misdetected-version" && quiet "$T/misdetected-version.err" || { grep OpenBLAS "$T/misdetected-version" | sed 's/^/#   /'; false; }
tap_result $? "misdetected: --version says which core dltrain set and why, and stderr stays empty"
in_env forced "$DLTRAIN" --version > "$T/forced-version" 2>/dev/null
grep -q "^OpenBLAS core: Prescott (OPENBLAS_CORETYPE=Prescott from the environment)$" "$T/forced-version"
tap_result $? "forced: OpenBLAS runs the core it was given, and --version says so"

# A plan from FLOP estimates: byte for byte wherever oneDNN has the same ISA
# (OpenBLAS's core must change nothing); on AVX2 the kernels oneDNN offers,
# and so each layout's memory, differ (LeNet-5's conv1 has no AVX2 oneDNN
# kernel), and with them the order of layouts of equal time: every layout's
# grid, schedule, times and shares are the same.
runs plan 0 "$DLTRAIN" plan --net "$N/lenet5.yaml" --flops 1e10 --no-db --threads 1 --ranks 4 --json
SAME="default unset misdetected forced" same plan out
tap_result $? "plan --flops --json: the same bytes whatever OpenBLAS's core"
/usr/bin/python3 - "$T/default-plan.out" "$T/avx2-plan.out" <<'PY'
import json, sys
def norm(f):
    p = json.load(open(f))
    p["layouts"] = sorted(json.dumps({k: v for k, v in l.items() if k != "memory_bytes"}, sort_keys=True)
                          for l in p["layouts"])
    return p
a, b = norm(sys.argv[1]), norm(sys.argv[2])
if a != b:
    print("# keys that differ:", [k for k in a if a[k] != b.get(k)])
sys.exit(0 if a == b else 1)
PY
tap_result $? "plan --flops --json on AVX2: the same layouts and times (memory aside)"

# check: the layer table and settings (not the planned peak, which depends on
# the kernels this CPU has).
runs check 0 "$DLTRAIN" check --net "$N/lenet5.yaml"
same check out '/^planned peak: /d'; tap_result $? "check LeNet-5: the same layer table and settings in every environment"
runs check-gpt 0 "$DLTRAIN" check --net "$N/gpt-tiny.yaml" --data "$N"
same check-gpt out '/^planned peak: /d'; tap_result $? "check GPT-tiny: the same layer table and settings in every environment"

# Refusals: a bad option value and a bad network file.
runs refuse-option 2 "$DLTRAIN" --net "$N/lenet5.yaml" --lr fast
printf 'name: bad\ninput: {shape: [1, 28, 28], classes: 10}\nlayers:\n  - {name: flatten, type: flatten}\n  - {name: fc, type: fc, units: -3}\nloss: softmax_cross_entropy\n' > "$T/bad.yaml"
runs refuse-file 2 "$DLTRAIN" check --net "$T/bad.yaml"
same refuse-option err && same refuse-option out && same refuse-file err && same refuse-file out &&
    [ ! -s "$T/default-refuse-option.out" ] && grep -q -- "--lr" "$T/default-refuse-option.err" &&
    grep -q "bad.yaml:5:33: layer 'fc' (fc), key 'units': expected an integer" "$T/default-refuse-file.err"
tap_result $? "refusals: the same message (option, file:line:col) and nothing on stdout in every environment"

# Training runs.  fp32: the environments differ only in the order of sums
# inside kernels (oneDNN's AVX2 against AVX-512 code, OpenBLAS's SSE3
# against AVX-512 GEMMs): a few fp32 roundings (2^-24) per product,
# measured at 4e-9..1.4e-8 relative over these runs; 2^-14 allows 1000
# roundings and is still far below a wrong result, which moves the loss in
# its second or third digit.  bf16: the emulated path rounds every product's
# inputs as the native one does, but sums in another order before the one
# bf16 rounding of each output (2^-9): measured 7.8e-5; allowed 2^-7.
LENET="$DLTRAIN --net $N/lenet5.yaml --max-steps 30 --limit-train 960 --limit-test 256 --epochs 1 --threads 2"
runs lenet 0 $LENET --metrics "$T/metrics.jsonl"
close lenet 6.1e-5; tap_result $? "LeNet-5: the same losses within fp32 rounding in every environment"
runs lenet-openblas 0 $LENET --kernel conv=openblas --kernel fc=openblas --metrics "$T/metrics.jsonl"
close lenet-openblas 6.1e-5; tap_result $? "LeNet-5 on OpenBLAS's GEMMs: the same losses within fp32 rounding"
GPT="$DLTRAIN --net $N/gpt-tiny.yaml --data $N --max-steps 10 --epochs 1 --threads 2"
runs gpt 0 $GPT --metrics "$T/metrics.jsonl"
close gpt 6.1e-5; tap_result $? "GPT-tiny: the same losses within fp32 rounding in every environment"
runs gpt-rows 0 $GPT --kernel fc=dnnl-gemm-rows --metrics "$T/metrics.jsonl"
close gpt-rows 6.1e-5; tap_result $? "GPT-tiny with a batch's positions as one matrix in its fc layers: the same losses"
runs gpt-bf16 0 $GPT --precision bf16 --metrics "$T/metrics.jsonl"
close gpt-bf16 7.8e-3; tap_result $? "GPT-tiny in bf16 (emulated on AVX2): the same losses within bf16 rounding"
