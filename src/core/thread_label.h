/* thread_label.h: what the calling thread's communication is for right now
 * (a layer's name, "bucket 3"), set by the executor's steps and the
 * gradients' communication thread, read by the flight recorder
 * (comm/flight.h) when it records a call.  Thread-local; "" until set. */
#ifndef DL_CORE_THREAD_LABEL_H
#define DL_CORE_THREAD_LABEL_H

#define DL_THREAD_LABEL_MAX 48

void dl_thread_label_set(const char *label);
const char *dl_thread_label(void);

#endif
