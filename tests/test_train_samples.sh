#!/bin/sh
# test_train_samples.sh: --eval-every and --sample-every (issue 28: the
# validation loss and a sample printed during training when asked).
# gpt-tiny on the man pages (tests/text_corpus.sh) with a constant learning
# rate: the test loss printed (and written to --metrics as "eval") at step
# 100 of a 200-step run equals the final test loss of a 100-step run; the
# same on 2 data-parallel ranks (each evaluates its slice, summed); the samples at
# steps 100 and 200 have --sample-tokens bytes and repeat with the seed;
# GPT-2's vocabulary decodes a BPE network's sample; a network of images is
# refused.
. "$top_srcdir/tests/tap.sh"
. "$top_srcdir/tests/text_corpus.sh"
T="$TMPDIR_TEST"
tap_plan 9
text_corpus "$top_builddir/tests/text-corpus" || { echo "Bail out! no text to train on"; exit 1; }
GPT="--net $top_srcdir/nets/gpt-tiny.yaml --data $top_builddir/tests/text-corpus --threads 1 --limit-test 64
     --schedule constant --warmup-epochs 0 --log-every 1000"
expect_status 0 "200 steps with --eval-every 100 --sample-every 100 --sample-tokens 50" -- \
    $DLTRAIN $GPT --max-steps 200 --eval-every 100 --sample-every 100 --sample-tokens 50 --metrics "$T/a.jsonl"
echo "$OUT" > "$T/a.out"
expect_output "^step 100: test loss [0-9.]+ acc [0-9.]+% top-5 [0-9.]+% \(64 samples\)" "step 100's test loss is printed"
$DLTRAIN $GPT --max-steps 100 --metrics "$T/b.jsonl" > /dev/null 2>&1
/usr/bin/python3 - "$T/a.jsonl" "$T/b.jsonl" <<'PY'
import json, sys
a = [json.loads(l) for l in open(sys.argv[1]) if '"eval"' in l]
b = [json.loads(l) for l in open(sys.argv[2]) if '"epoch"' in l]
print("# eval at step %s: %r; a 100-step run's final test loss %r" % (a[0]["global_step"], a[0]["test_loss"],
      b[-1]["test_loss"]))
sys.exit(0 if len(a) == 1 and a[0]["global_step"] == 100 and a[0]["test_loss"] == b[-1]["test_loss"] else 1)
PY
tap_result $? "it equals the final test loss of a run of 100 steps (metrics event eval)"
/usr/bin/python3 - "$T/a.out" <<'PY'
import re, sys
text = open(sys.argv[1], "rb").read()
s = re.findall(rb"step (\d+): sample ---\n(.*?)\n---\n", text, re.S)
print("# samples at steps %s, %s bytes" % ([int(k) for k, _ in s], [len(v) for _, v in s]))
sys.exit(0 if [int(k) for k, _ in s] == [100, 200] and all(len(v) == 50 for _, v in s) else 1)
PY
tap_result $? "samples of 50 bytes at steps 100 and 200"
$DLTRAIN $GPT --max-steps 200 --eval-every 100 --sample-every 100 --sample-tokens 50 > "$T/a2.out" 2>&1
sed -n '/: sample ---$/,/^---$/p' "$T/a.out" > "$T/s1"
sed -n '/: sample ---$/,/^---$/p' "$T/a2.out" > "$T/s2"
[ -s "$T/s1" ] && cmp -s "$T/s1" "$T/s2"; tap_result $? "the same samples from the same seed"
if command -v mpirun >/dev/null 2>&1; then
    timeout 120 mpirun --oversubscribe -np 2 $DLTRAIN $GPT --max-steps 200 --eval-every 100 --metrics "$T/d.jsonl" \
        > /dev/null 2>&1 &&
        timeout 120 mpirun --oversubscribe -np 2 $DLTRAIN $GPT --max-steps 100 --metrics "$T/e.jsonl" > /dev/null 2>&1 &&
        /usr/bin/python3 - "$T/d.jsonl" "$T/e.jsonl" <<'PY'
import json, sys
d = [json.loads(l) for l in open(sys.argv[1]) if '"eval"' in l]
e = [json.loads(l) for l in open(sys.argv[2]) if '"epoch"' in l]
print("# 2 ranks: step 100 of 200 %r, a 100-step run's final %r" % (d[0]["test_loss"], e[-1]["test_loss"]))
sys.exit(0 if d[0]["test_loss"] == e[-1]["test_loss"] and d[0]["test_samples"] == 64 else 1)
PY
    tap_result $? "on 2 data-parallel ranks (each evaluating its half) the same"
else
    echo "ok 6 # SKIP mpirun not found"
fi
if [ -s "$top_srcdir/vocab/gpt2.tiktoken" ]; then
    mkdir -p "$T/ids"
    $DLTRAIN tokenize -o "$T/ids" "$top_builddir"/tests/text-corpus/*.txt > /dev/null 2>&1
    expect_status 0 "a GPT-2-vocabulary network samples through the BPE" -- \
        $DLTRAIN --net "$top_srcdir/nets/gpt-tiny.yaml" --set args.vocab=50257 --dataset tokens --data "$T/ids" \
            --threads 1 --limit-test 16 --max-steps 2 --sample-every 1 --sample-tokens 8
else
    echo "ok 7 # SKIP no vocab/gpt2.tiktoken (tools/deps fetches it)"
fi
expect_status 2 "--sample-every on a network of images" -- \
    $DLTRAIN --net lenet5 --max-steps 1 --sample-every 1
expect_output "--sample-every: needs a network of token ids with a loss at every position" "  the message says why"
exit $((tap_failed > 0))
