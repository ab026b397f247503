/* device_kind.c: the spellings of the device kinds (see device_kind.h). */
#include "core/device_kind.h"

#include <stddef.h>

const char *const dl_device_names[] = {"cpu", "cuda", "emulated", NULL};
