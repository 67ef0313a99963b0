/* gpu_share.h — GPU tests on a GPU that others may use too.

   1. A machine-wide lock, so that two of our GPU tests never run at once: flock(2) on
      $DPMEM_GPU_LOCK (default /tmp/dpmem-gpu.lock), held until the process exits. The holder writes
      "<pid> <name>" into the file (a waiter names it) and exports DPMEM_GPU_LOCK_HELD=<pid>: a child
      it starts (the OOM child, a test under compute-sanitizer started by a script that holds the
      lock, tests/gpu_lock.sh) runs under its parent's lock instead of waiting for it forever.
      The path is in a shared /tmp: it is opened without following a link (O_NOFOLLOW), must be a
      regular file (a FIFO or device is refused: running without the lock), and the name is
      written (truncating) only into a file this user owns with one link; another user's lock
      file is only locked (opened read-only where it is not writable to us).
   2. The other processes holding memory on the device (nvidia-smi --query-compute-apps), listed
      before and after device-wide measurements (cudaMemGetInfo deltas): when such a check fails,
      the test asks gpu_apps_quiet whether another process held device memory meanwhile. If one
      did, the check says nothing about the kit: it is skipped with a line naming those processes
      and their memory. If none did, the failure is the kit's: a wrong tag.
   Plain C (no CUDA): tests/test_gpu_share.c checks the lock and the decisions on canned listings;
   tests/test_cuda_gpu.cu uses them on a GPU. C and C++. */
#ifndef GPU_SHARE_H
#define GPU_SHARE_H

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#define GPU_LOCK_DEFAULT "/tmp/dpmem-gpu.lock"
#define GPU_APPS_MAX 64

/* Takes the GPU test lock for the rest of the process, waiting for the holder (one line on `msg`
   naming it). Returns the descriptor (keep it open; exit releases it), 0 when a living parent
   already holds it for us (DPMEM_GPU_LOCK_HELD), or -1 when the lock file cannot be used (a line on
   `msg` says the test runs without it). */
static inline int gpu_lock_take(const char *who, FILE *msg) {
    const char *held = getenv("DPMEM_GPU_LOCK_HELD"), *path = getenv("DPMEM_GPU_LOCK");
    char pid[32], holder[128] = "";
    int fd;
    ssize_t n;
    if (held && *held && atol(held) > 0 && (kill((pid_t)atol(held), 0) == 0 || errno == EPERM)) return 0;
    struct stat st;
    if (!path || !*path) path = GPU_LOCK_DEFAULT;
    /* O_NOFOLLOW: a link planted at the path is refused (ELOOP), never written through; O_NONBLOCK:
       a FIFO planted there does not hang the open (it is refused below) */
    fd = open(path, O_RDWR | O_CREAT | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC, 0666);
    if (fd < 0 && errno == EACCES) fd = open(path, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC);
    if (fd < 0) {
        fprintf(msg, "%s: cannot open the GPU lock %s: %s: running without it\n", who, path,
                errno == ELOOP ? "a symbolic link (not followed)" : strerror(errno));
        return -1;
    }
    if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
        fprintf(msg, "%s: the GPU lock %s is not a regular file: running without it\n", who, path);
        close(fd);
        return -1;
    }
    if (flock(fd, LOCK_EX | LOCK_NB) != 0) {
        if (errno != EWOULDBLOCK) {
            fprintf(msg, "%s: cannot lock %s: %s: running without it\n", who, path, strerror(errno));
            close(fd);
            return -1;
        }
        n = pread(fd, holder, sizeof holder - 1, 0);
        holder[n > 0 ? n : 0] = 0;
        holder[strcspn(holder, "\n")] = 0;
        fprintf(msg, "%s: waiting for the GPU lock %s (held by pid %s)\n", who, path, *holder ? holder : "?");
        fflush(msg);
        while (flock(fd, LOCK_EX) != 0)
            if (errno != EINTR) {
                fprintf(msg, "%s: cannot lock %s: %s: running without it\n", who, path, strerror(errno));
                close(fd);
                return -1;
            }
    }
    /* the name is a courtesy, written only into our own file (the descriptor is that inode, no
       link followed): another user's file, or one hard-linked elsewhere, is left as it is */
    snprintf(holder, sizeof holder, "%ld %s\n", (long)getpid(), who);
    if (st.st_uid == geteuid() && st.st_nlink == 1)
        if (ftruncate(fd, 0) != 0 || pwrite(fd, holder, strlen(holder), 0) < 0) { /* ignored */ }
    snprintf(pid, sizeof pid, "%ld", (long)getpid());
    setenv("DPMEM_GPU_LOCK_HELD", pid, 1);
    return fd;
}

/* One process with memory on the device: its pid and MiB (-1: the driver does not say, "[N/A]"). */
typedef struct { long pid; long long mib; } gpu_app;
typedef struct { int ok; int n; gpu_app app[GPU_APPS_MAX]; } gpu_apps;   /* ok = 0: no listing */

/* Parses nvidia-smi --query-compute-apps=pid,used_memory --format=csv,noheader[,nounits]: lines
   "<pid>, <MiB>[ MiB]" or "<pid>, [N/A]"; no line when no process. 0, or -1 (ok = 0) on anything
   else (an error message, a cut line). */
static inline int gpu_apps_parse(const char *text, gpu_apps *out) {
    const char *p = text;
    out->ok = 0;
    out->n = 0;
    while (p && *p) {
        const char *end = strchr(p, '\n');
        char line[256], *q, *rest;
        size_t len = end ? (size_t)(end - p) : strlen(p);
        long pid;
        if (len >= sizeof line) return -1;
        memcpy(line, p, len);
        line[len] = 0;
        p = end ? end + 1 : NULL;
        while (len && (line[len - 1] == '\r' || line[len - 1] == ' ')) line[--len] = 0;
        if (!len) continue;
        pid = strtol(line, &q, 10);
        if (q == line || pid <= 0 || *q != ',' || out->n == GPU_APPS_MAX) return -1;
        rest = q + 1;
        while (*rest == ' ') rest++;
        out->app[out->n].pid = pid;
        if (*rest == '[') out->app[out->n].mib = -1;              /* [N/A], [Not Supported] */
        else {
            long long mib = strtoll(rest, &q, 10);
            if (q == rest || mib < 0 || (*q && strcmp(q, " MiB") != 0)) return -1;
            out->app[out->n].mib = mib;
        }
        out->n++;
    }
    out->ok = 1;
    return 0;
}

/* Lists the processes on the device of that PCI bus id (NULL, or an id nvidia-smi does not take:
   every device, which lists more, never fewer) through nvidia-smi. 0, or -1 (ok = 0) when
   nvidia-smi is missing or says something else. */
static inline int gpu_apps_query(const char *bus_id, gpu_apps *out) {
    char cmd[256], text[8192];
    size_t n;
    FILE *f;
    out->ok = 0;
    out->n = 0;
    snprintf(cmd, sizeof cmd, "nvidia-smi --query-compute-apps=pid,used_memory --format=csv,noheader,nounits%s%s 2>/dev/null",
             bus_id ? " -i " : "", bus_id ? bus_id : "");
    if (!(f = popen(cmd, "r"))) return -1;
    n = fread(text, 1, sizeof text - 1, f);
    text[n] = 0;
    if (pclose(f) != 0) return bus_id ? gpu_apps_query(NULL, out) : -1;
    return gpu_apps_parse(text, out);
}

static inline const gpu_app *gpu_apps_find(const gpu_apps *a, long pid) {
    for (int i = 0; i < a->n; i++)
        if (a->app[i].pid == pid) return &a->app[i];
    return NULL;
}

/* Could another process have moved the device's used bytes between the two listings? 1: no (no
   other process in either); 0: yes, and `why` names each other process with its memory: "pid 812:
   2048 MiB", "pid 812: 442 -> 463 MiB", "pid 812: 463 MiB (came)" / "(went)", "? MiB" where the
   driver does not say. One that held the same memory in both is named too: the listings are two
   moments, and what it did between them (allocate and free again) is not seen. A listing that failed
   cannot tell: 1, and `why` says so. `self`: this process (left out). */
static inline int gpu_apps_quiet(const gpu_apps *before, const gpu_apps *after, long self, char *why, size_t n) {
    size_t len = 0;
    int quiet = 1;
    if (n) why[0] = 0;
    if (!before->ok || !after->ok) {
        snprintf(why, n, "the GPU's processes could not be listed (nvidia-smi --query-compute-apps)");
        return 1;
    }
    for (int pass = 0; pass < 2; pass++) {
        const gpu_apps *a = pass ? after : before, *b = pass ? before : after;
        for (int i = 0; i < a->n; i++) {
            const gpu_app *x = &a->app[i], *y = gpu_apps_find(b, x->pid);
            char one[96], mib[32];
            if (x->pid == self) continue;
            if (pass == 1 && y) continue;                                     /* seen in the first pass */
            if (x->mib < 0) snprintf(mib, sizeof mib, "? MiB");
            else snprintf(mib, sizeof mib, "%lld MiB", x->mib);
            if (!y) snprintf(one, sizeof one, "pid %ld: %s (%s)", x->pid, mib, pass ? "came" : "went");
            else if (x->mib >= 0 && y->mib >= 0 && x->mib != y->mib) snprintf(one, sizeof one, "pid %ld: %lld -> %lld MiB", x->pid, x->mib, y->mib);
            else snprintf(one, sizeof one, "pid %ld: %s", x->pid, mib);
            quiet = 0;
            if (len < n) len += (size_t)snprintf(why + len, n - len, "%s%s", len ? ", " : "", one);
        }
    }
    return quiet;
}

#endif
