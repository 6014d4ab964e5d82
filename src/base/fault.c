/* fault.c — survives a memory-mapped file shrinking under the process (g4_guard_mapped_files in
 * gemma4c.h): a read past the file's new end raises SIGBUS (BUS_ADRERR); the handler maps a page
 * of zeros over the faulting page, so the read completes, and records the loss for the session
 * API to fail the step and a server to report itself unhealthy. Any other SIGBUS keeps its
 * default action. The process-wide flag is the one piece of global state this needs. */
#include <signal.h>
#include <stdatomic.h>
#include <stdint.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "gemma4c.h"

static atomic_int file_lost;
static uintptr_t page_mask;

static void on_sigbus(int sig, siginfo_t *si, void *uc) {
    (void)uc;
    if (si->si_code == BUS_ADRERR && si->si_addr) {
        void *page = (void *)((uintptr_t)si->si_addr & page_mask);
        /* mmap is a plain system call: safe here in practice, though POSIX does not list it */
        if (mmap(page, ~page_mask + 1, PROT_READ, MAP_FIXED | MAP_PRIVATE | MAP_ANONYMOUS, -1, 0) != MAP_FAILED) {
            atomic_store(&file_lost, 1);
            return;
        }
    }
    signal(sig, SIG_DFL);
    raise(sig);
}

g4_status g4_guard_mapped_files(void) {
    const long pg = sysconf(_SC_PAGESIZE);
    page_mask = ~(uintptr_t)((pg > 0 ? pg : 4096) - 1);
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_sigaction = on_sigbus;
    sa.sa_flags = SA_SIGINFO;
    sigemptyset(&sa.sa_mask);
    if (sigaction(SIGBUS, &sa, NULL)) return g4_fail(G4_ERR_RUNTIME, "cannot install the SIGBUS handler");
    return G4_OK;
}

int g4_mapped_file_lost(void) { return atomic_load(&file_lost); }
