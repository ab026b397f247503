/* policy.c: what may be tuned and how: the micro-batch policies (undivided,
 * powerOfTwo, all, as mu-cuDNN names them), the option defaults and which
 * layers are tuned: those whose op kind allows micro-batches (micro_batch in
 * ops/op.h; never batch normalisation, whose statistics span the batch, nor
 * dropout, whose random stream is drawn in batch order). */
#include "tune/tune.h"

#include <string.h>

const char *const dl_tune_policy_names[] = {"undivided", "powerOfTwo", "all", NULL};

void dl_tune_options_default(struct dl_tune_options *o)
{
    memset(o, 0, sizeof *o);
    o->policy = DL_TUNE_POWER_OF_TWO;
    o->warmup = 1;
    o->repeats = 5;
}

int dl_tune_policy_sizes(enum dl_tune_policy p, int B, int *sizes)
{
    int n = 0;
    if (p == DL_TUNE_ALL) {
        for (int b = 1; b <= B; b++)
            sizes[n++] = b;
        return n;
    }
    if (p == DL_TUNE_POWER_OF_TWO)
        for (int b = 1; b < B; b *= 2)
            sizes[n++] = b;
    sizes[n++] = B;
    return n;
}

int dl_tune_layer_tunable(const struct dl_layer *l)
{
    return l->kind->micro_batch;
}
