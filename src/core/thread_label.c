/* thread_label.c: the calling thread's label (see thread_label.h). */
#include "core/thread_label.h"

#include <stdio.h>

static _Thread_local char label[DL_THREAD_LABEL_MAX];

void dl_thread_label_set(const char *text)
{
    snprintf(label, sizeof label, "%s", text ? text : "");
}

const char *dl_thread_label(void)
{
    return label;
}
