/* flight_fatal.c: the flight recorder's record written when the rank dies
 * of a fatal signal (see flight.h's dl_flight_fatal_install). */
#include "comm/flight.h"

#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "core/thread_label.h"

static const int fatal_signals[] = {SIGSEGV, SIGBUS, SIGFPE, SIGILL, SIGABRT};
#define N_FATAL (int)(sizeof fatal_signals / sizeof *fatal_signals)
static struct sigaction before[N_FATAL];
static volatile sig_atomic_t entered;

static void on_fatal(int sig)
{
    struct dl_flight *f = dl_flight_global();
    if (f && !entered) {
        entered = 1;
        alarm(10); /* a lock the crash left held ends the process rather than hang it */
        const char *name = sigabbrev_np(sig), *label = dl_thread_label();
        char msg[1400];
        int n = snprintf(msg, sizeof msg, "dltrain: rank %d: SIG%s (%s) at step %ld%s%s%s; its flight record: "
                         "%s/flight-rank%05d.jsonl\n", dl_flight_rank(f), name ? name : "?", strsignal(sig),
                         dl_flight_step(f),
                         label && *label ? " in '" : "", label && *label ? label : "", label && *label ? "'" : "",
                         dl_flight_dir(f), dl_flight_rank(f));
        if (n > 0)
            (void)!write(STDERR_FILENO, msg, (size_t)n < sizeof msg ? (size_t)n : sizeof msg - 1);
        char what[16];
        snprintf(what, sizeof what, "SIG%s", name ? name : "?");
        dl_flight_dump_fatal(f, what);
    }
    for (int i = 0; i < N_FATAL; i++) /* the handler before ours (MPI's backtrace, or the default) */
        if (fatal_signals[i] == sig)
            sigaction(sig, &before[i], NULL);
    raise(sig);
}

void dl_flight_fatal_install(void)
{
    static int installed;
    if (installed)
        return;
    installed = 1;
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_fatal;
    sigemptyset(&sa.sa_mask);
    for (int i = 0; i < N_FATAL; i++)
        sigaction(fatal_signals[i], &sa, &before[i]);
}
