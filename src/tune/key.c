/* key.c: what identifies a measurement in the tuning database: the op (kind,
 * every attribute from its schema table, input and output shapes), the
 * kernel, direction, micro-batch size, thread count, the library versions
 * found at run time and the device (the CPU model, or a device kernel's
 * device: GPU name and cuDNN version).  Versions are looked up by symbol name
 * (dlsym), so that no #ifdef on a library is needed here and a library
 * upgrade invalidates old timings by itself. */
#include "tune/tune_impl.h"

#include "config.h"

#include <dlfcn.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "backends/device.h"
#include "core/threads.h"

static void appendf(char *buf, size_t size, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static void appendf(char *buf, size_t size, const char *fmt, ...)
{
    size_t len = strlen(buf);
    if (len + 1 >= size)
        return;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(buf + len, size - len, fmt, ap);
    va_end(ap);
}

static void attrs_str(const struct dl_layer *l, char *buf, size_t size)
{
    const struct dl_op_kind *op = l->kind;
    for (int i = 0; i < op->n_attrs; i++) {
        const struct dl_attr_desc *d = &op->attrs[i];
        const unsigned char *p = (const unsigned char *)l->attr + d->offset;
        int iv[2];
        double dv;
        switch (d->type) {
        case DL_ATTR_INT:
        case DL_ATTR_BOOL: memcpy(iv, p, sizeof(int)); appendf(buf, size, ",%s=%d", d->key, iv[0]); break;
        case DL_ATTR_INT2: memcpy(iv, p, 2 * sizeof(int)); appendf(buf, size, ",%s=%dx%d", d->key, iv[0], iv[1]); break;
        case DL_ATTR_FLOAT: memcpy(&dv, p, sizeof dv); appendf(buf, size, ",%s=%.9g", d->key, dv); break;
        case DL_ATTR_ENUM: memcpy(iv, p, sizeof(int)); appendf(buf, size, ",%s=%s", d->key, d->choices[iv[0]]); break;
        }
    }
}

/* A line's value in /proc/cpuinfo ("model name\t: AMD EPYC" -> "AMD EPYC"). */
static const char *cpuinfo_value(const char *line)
{
    const char *v = strchr(line, ':');
    v = v ? v + 1 : line;
    while (*v == ' ')
        v++;
    return v;
}

/* For a host kernel, the CPU as /proc/cpuinfo names it, with its family,
 * model and the instruction sets our kernels choose by ("AMD EPYC (family
 * 26 model 2; avx2 avx512f avx512_bf16)"): a virtual machine may call two
 * generations by one name, and a timing of one holds nothing for the
 * other.  For a device's kernel, the device's own description (a GPU's name
 * and cuDNN version). */
static void device_str(const struct dl_kernel *k, char *buf, size_t size)
{
    snprintf(buf, size, "%s", k->backend);
    const struct dl_device *dev = dl_device_get(k->device);
    if (k->device != DL_DEVICE_CPU) {
        snprintf(buf, size, "%s: %s", dl_device_names[k->device], dev ? dev->describe() : "absent");
        return;
    }
    static const char *const isa[] = {"avx2", "avx512f", "avx512_bf16", "amx_bf16", NULL};
    char name[80] = "", family[16] = "?", model[16] = "?", flags[64] = "";
    FILE *f = fopen("/proc/cpuinfo", "r");
    char line[4096];
    int flags_seen = 0; /* the first CPU's lines are enough */
    while (f && !flags_seen && fgets(line, sizeof line, f)) {
        const char *v = cpuinfo_value(line);
        int len = (int)strcspn(v, "\n");
        if (strncmp(line, "model name", 10) == 0)
            snprintf(name, sizeof name, "%.*s", len, v);
        else if (strncmp(line, "cpu family", 10) == 0)
            snprintf(family, sizeof family, "%.*s", len, v);
        else if (strncmp(line, "model\t", 6) == 0)
            snprintf(model, sizeof model, "%.*s", len, v);
        else if ((flags_seen = strncmp(line, "flags", 5) == 0) != 0) {
            char padded[sizeof line + 2], word[32];
            snprintf(padded, sizeof padded, " %.*s ", len, v);
            for (int i = 0; isa[i]; i++) {
                snprintf(word, sizeof word, " %s ", isa[i]);
                if (strstr(padded, word))
                    appendf(flags, sizeof flags, "%s%s", *flags ? " " : "", isa[i]);
            }
        }
    }
    if (f)
        fclose(f);
    if (*name)
        snprintf(buf, size, "%s (family %s model %s; %s)", name, family, model, *flags ? flags : "no avx2");
}

static void versions_str(char *buf, size_t size)
{
    char libs[512];
    dl_kernel_libraries(libs, sizeof libs);
    snprintf(buf, size, "dltrain %s%s%s", PACKAGE_VERSION, *libs ? "; " : "", libs);
}

void dl_tune_key_layer(struct dl_tune_key *k, const struct dl_layer *l, const struct dl_kernel *kernel)
{
    memset(k, 0, sizeof *k);
    snprintf(k->op, sizeof k->op, "%s", l->kind->name);
    attrs_str(l, k->op, sizeof k->op);
    for (int i = 0; i < l->n_in; i++)
        appendf(k->op, sizeof k->op, " in=%dx%dx%d", l->in_shape[i].c, l->in_shape[i].h, l->in_shape[i].w);
    appendf(k->op, sizeof k->op, " out=%dx%dx%d", l->out_shape.c, l->out_shape.h, l->out_shape.w);
    k->kernel = kernel->name;
    k->dtype = dl_dtype_name(kernel->dtype);
    k->threads = dl_threads_get();
    versions_str(k->versions, sizeof k->versions);
    device_str(kernel, k->device, sizeof k->device);
}
