/* kernel_fault.c: failures inside kernel calls (kernel.h's struct
 * dl_kernel_fault): a kernel records the first one, its caller turns it
 * into an error naming the layer, the kernel, the direction and the call. */
#include "backends/kernel.h"

#include <stdio.h>
#include <string.h>

const char *const dl_dir_names[DL_N_DIRS] = {"forward", "backward-data", "backward-weights"};

void dl_kernel_fail(const struct dl_kernel_args *a, const char *kernel, const char *call, const char *reason)
{
    struct dl_kernel_fault *f = a->fault;
    if (!f || f->failed)
        return;
    f->failed = 1;
    snprintf(f->kernel, sizeof f->kernel, "%s", kernel);
    snprintf(f->call, sizeof f->call, "%s", call);
    snprintf(f->reason, sizeof f->reason, "%s", reason ? reason : "no reason given");
}

int dl_kernel_fault_error(struct dl_kernel_fault *f, const struct dl_layer *l, enum dl_dir dir,
                          struct dl_error *err)
{
    if (!f->failed)
        return DL_OK;
    int rc = dl_errorf(err, DL_ERR_INTERNAL, "layer '%s' (kernel %s, %s): %s failed: %s", l->name, f->kernel,
                       dl_dir_names[dir], f->call, f->reason);
    memset(f, 0, sizeof *f);
    return rc;
}
