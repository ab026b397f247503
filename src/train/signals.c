/* signals.c: flag-only signal handlers (see signals.h).  The handler does
 * nothing but store the signal number in a volatile sig_atomic_t: everything
 * else (finishing the step, agreeing across ranks, writing the checkpoint)
 * happens in normal code.  This flag is the one piece of process-wide state
 * the project keeps, because a signal handler cannot be given a context. */
#include "train/signals.h"

#include <pthread.h>
#include <signal.h>
#include <stddef.h>
#include <string.h>
#include <unistd.h>

static volatile sig_atomic_t pending;
static const int watched[] = {SIGTERM, SIGINT, SIGUSR1};
static struct sigaction saved[3];
static int installed;

static void on_signal(int sig)
{
    if (!pending)
        pending = sig;
}

/* The signals are blocked in the installing thread, and so in every thread
 * it starts later (OpenMP, oneDNN, the communication thread), and taken by
 * this thread with sigwait: a stop signal then never interrupts a library's
 * own waits.  (Delivered to an arbitrary thread, SIGTERM sometimes ended in
 * a corrupted heap inside oneDNN's sgemm, about one run in ten.)  A second
 * SIGINT ends the process at once, as a second Ctrl-C should. */
static void *signal_thread(void *arg)
{
    sigset_t *set = arg;
    for (;;) {
        int sig;
        if (sigwait(set, &sig) != 0)
            continue;
        if (pending && sig == SIGINT)
            _exit(130);
        if (!pending)
            pending = sig;
    }
    return NULL;
}

int dl_signals_install(void)
{
    static sigset_t set;
    static pthread_t thread;
    static int started;
    pending = 0;
    if (!started) {
        sigemptyset(&set);
        for (int i = 0; i < 3; i++)
            sigaddset(&set, watched[i]);
        if (pthread_sigmask(SIG_BLOCK, &set, NULL) == 0 && pthread_create(&thread, NULL, signal_thread, &set) == 0) {
            pthread_detach(thread);
            started = 1;
        }
    }
    for (int i = 0; i < 3; i++) {
        struct sigaction sa;
        memset(&sa, 0, sizeof sa);
        sa.sa_handler = on_signal;
        sigemptyset(&sa.sa_mask);
        sa.sa_flags = SA_RESTART;
        if (watched[i] == SIGINT)
            sa.sa_flags |= SA_RESETHAND; /* a second Ctrl-C takes the default action */
        if (sigaction(watched[i], &sa, installed ? NULL : &saved[i]) != 0)
            return -1;
    }
    installed = 1;
    return 0;
}

void dl_signals_uninstall(void)
{
    if (!installed)
        return;
    for (int i = 0; i < 3; i++)
        sigaction(watched[i], &saved[i], NULL);
    installed = 0;
}

int dl_signals_pending(void)
{
    return pending;
}

void dl_signals_clear(void)
{
    pending = 0;
}

const char *dl_signal_name(int sig)
{
    switch (sig) {
    case SIGTERM: return "SIGTERM";
    case SIGINT: return "SIGINT";
    case SIGUSR1: return "SIGUSR1";
    default: return "signal";
    }
}
