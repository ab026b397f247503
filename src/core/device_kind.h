/* device_kind.h: the kinds of device an executor can run on, named once,
 * so that the network file's train.device (spec/netspec.h), the device
 * tables (backends/device.h) and the kernels (backends/kernel.h) hold the
 * same type. */
#ifndef DL_CORE_DEVICE_KIND_H
#define DL_CORE_DEVICE_KIND_H

/* The host's CPU; an NVIDIA GPU through CUDA; the testing aid of
 * backends/device_emulated.c (CPU kernels, memory the host may not touch). */
enum dl_device_kind { DL_DEVICE_CPU, DL_DEVICE_CUDA, DL_DEVICE_EMULATED, DL_N_DEVICE_KINDS };

/* "cpu", "cuda", "emulated", NULL: the spellings of enum dl_device_kind. */
extern const char *const dl_device_names[];

#endif
