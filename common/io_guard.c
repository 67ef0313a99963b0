/* io_guard.c — see io_guard.h. */
#include "io_guard.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static const char *kind_of(mode_t m) {
    return S_ISFIFO(m) ? "a FIFO" : S_ISDIR(m) ? "a directory" : S_ISCHR(m) ? "a character device"
         : S_ISBLK(m) ? "a block device" : S_ISSOCK(m) ? "a socket" : "not a plain file";
}

int io_open_input(const char *path, int *fd_out, struct stat *st, char *err, size_t errlen) {
    /* O_NONBLOCK: opening a FIFO that has no writer returns at once instead of waiting for one. */
    int fd = open(path, O_RDONLY | O_NONBLOCK | O_CLOEXEC);
    if (fd < 0) { snprintf(err, errlen, "%s: %s", path, strerror(errno)); return -1; }
    if (fstat(fd, st) != 0) {
        snprintf(err, errlen, "%s: %s", path, strerror(errno));
        close(fd);
        return -1;
    }
    if (!S_ISREG(st->st_mode)) {
        snprintf(err, errlen, "%s: not a regular file (%s)", path, kind_of(st->st_mode));
        close(fd);
        return -1;
    }
    int fl = fcntl(fd, F_GETFL);
    if (fl != -1) fcntl(fd, F_SETFL, fl & ~O_NONBLOCK);
    *fd_out = fd;
    return 0;
}

int io_read_file(const char *path, size_t limit, char **data, size_t *n, char *err, size_t errlen) {
    int fd;
    struct stat st;
    *data = NULL; *n = 0;
    if (io_open_input(path, &fd, &st, err, errlen)) return -1;
    if ((unsigned long long)st.st_size > limit) {
        snprintf(err, errlen, "%s: %lld bytes, more than the %zu this file can sensibly hold", path, (long long)st.st_size, limit);
        close(fd);
        return -1;
    }
    /* st_size is a hint only: a pseudo-file (/proc) says 0 and still has content. */
    size_t cap = (size_t)st.st_size + 1 < 4096 ? 4096 : (size_t)st.st_size + 1, len = 0;
    char *buf = malloc(cap);
    int rc = -1;
    if (!buf) { snprintf(err, errlen, "%s: out of memory", path); goto out; }
    for (;;) {
        if (len > limit) break;
        if (len + 1 == cap) {   /* grow, up to one byte past the limit (which says: too large) */
            size_t nc = cap * 2 > limit + 2 ? limit + 2 : cap * 2;
            char *b = realloc(buf, nc);
            if (!b) { snprintf(err, errlen, "%s: out of memory", path); goto out; }
            buf = b; cap = nc;
        }
        ssize_t k = read(fd, buf + len, cap - 1 - len);
        if (k < 0 && errno == EINTR) continue;
        if (k < 0) { snprintf(err, errlen, "%s: read error: %s", path, strerror(errno)); goto out; }
        if (k == 0) break;
        len += (size_t)k;
    }
    if (len > limit) { snprintf(err, errlen, "%s: more than the %zu bytes this file can sensibly hold", path, limit); goto out; }
    buf[len] = 0;
    *data = buf; *n = len;
    buf = NULL;
    rc = 0;
out:
    free(buf);
    close(fd);
    return rc;
}

int io_replace_file(const char *path, const void *data, size_t n, char *err, size_t errlen) {
    size_t k = strlen(path) + 32;
    char *tmp = malloc(k);
    if (!tmp) { snprintf(err, errlen, "%s: out of memory", path); return -1; }
    snprintf(tmp, k, "%s.tmp.%ld", path, (long)getpid());
    int fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0666);
    if (fd < 0) {
        snprintf(err, errlen, "%s: cannot create: %s", tmp, strerror(errno));
        free(tmp);
        return -1;
    }
    const char *p = data;
    size_t done = 0;
    int e = 0;
    while (done < n) {
        ssize_t w = write(fd, p + done, n - done);
        if (w < 0 && errno == EINTR) continue;
        if (w < 0) { e = errno; break; }
        if (w == 0) { e = ENOSPC; break; }
        done += (size_t)w;
    }
    if (!e && fsync(fd) != 0 && errno != EINVAL) e = errno;   /* the bytes are on disk before the name moves */
    if (close(fd) != 0 && !e) e = errno;
    if (!e && rename(tmp, path) != 0) e = errno;
    if (e) {
        snprintf(err, errlen, "%s: write failed: %s", path, strerror(e));
        unlink(tmp);
        free(tmp);
        return -1;
    }
    free(tmp);
    return 0;
}

/* Where a path points: its inode when it exists; else its directory's real path and its name (so
   that "a.log" and "./a.log" are one file before either exists). */
typedef struct { int exists; dev_t dev; ino_t ino; char where[PATH_MAX + 256]; } Place;

static void place_of(const char *path, Place *p) {
    struct stat st;
    memset(p, 0, sizeof *p);
    if (stat(path, &st) == 0) { p->exists = 1; p->dev = st.st_dev; p->ino = st.st_ino; return; }
    char dir[PATH_MAX], real[PATH_MAX];
    const char *slash = strrchr(path, '/');
    const char *name = slash ? slash + 1 : path;
    size_t dl = slash ? (size_t)(slash - path) : 0;
    if (dl >= sizeof dir) dl = sizeof dir - 1;
    if (slash && dl == 0) snprintf(dir, sizeof dir, "/");
    else if (slash) { memcpy(dir, path, dl); dir[dl] = 0; }
    else snprintf(dir, sizeof dir, ".");
    if (realpath(dir, real)) snprintf(p->where, sizeof p->where, "%s/%s", real, name);
    else snprintf(p->where, sizeof p->where, "%s", path);
}

static int same_place(const Place *a, const Place *b) {
    if (a->exists && b->exists) return a->dev == b->dev && a->ino == b->ino;
    if (a->exists || b->exists) return 0;
    return strcmp(a->where, b->where) == 0;
}

int io_check_outputs(const IoPath *paths, int n, char *err, size_t errlen) {
    Place *pl = calloc(n > 0 ? (size_t)n : 1, sizeof *pl);
    if (!pl) { snprintf(err, errlen, "out of memory"); return -1; }
    int rc = 0;
    for (int i = 0; i < n; i++)
        if (paths[i].path && strcmp(paths[i].path, "-")) place_of(paths[i].path, &pl[i]);
    for (int i = 0; i < n && rc == 0; i++) {
        if (!paths[i].output || !paths[i].path || !strcmp(paths[i].path, "-")) continue;
        for (int j = 0; j < n && rc == 0; j++) {
            if (j == i || !paths[j].path || !strcmp(paths[j].path, "-")) continue;
            if (paths[j].output && j < i) continue;   /* a pair of outputs is reported once */
            if (!same_place(&pl[i], &pl[j])) continue;
            snprintf(err, errlen, "%s %s is the same file as %s %s: refusing to write over %s", paths[i].what, paths[i].path,
                     paths[j].what, paths[j].path, paths[j].output ? "another output" : "an input");
            rc = -1;
        }
    }
    free(pl);
    return rc;
}

/* ---- a directory replaced whole ---------------------------------------------------------------- */

/* dir without its trailing slashes, resolved when it exists (*exists set): the directory a stage sits beside. */
static int dir_target(const char *dir, char *out, size_t n, int *exists, char *err, size_t errlen) {
    size_t k = strlen(dir);
    while (k > 1 && dir[k - 1] == '/') k--;
    if (k == 0 || k >= n) { snprintf(err, errlen, "'%s': not a usable directory name", dir); return -1; }
    memcpy(out, dir, k);
    out[k] = 0;
    struct stat sb;
    *exists = stat(out, &sb) == 0;
    if (!*exists && errno != ENOENT) { snprintf(err, errlen, "%s: %s", out, strerror(errno)); return -1; }
    if (*exists && !S_ISDIR(sb.st_mode)) { snprintf(err, errlen, "%s: exists and is not a directory", out); return -1; }
    char real[PATH_MAX];
    if (*exists && realpath(out, real)) {
        if (strlen(real) >= n) { snprintf(err, errlen, "%s: path too long", real); return -1; }
        snprintf(out, n, "%s", real);
    }
    return 0;
}

/* Calls fn(dirfd, name, st, user) for every entry of path but . and ..; stops at the first non-zero. */
static int each_entry(const char *path, int (*fn)(int, const char *, const struct stat *, void *), void *user) {
    DIR *d = opendir(path);
    if (!d) return -1;
    int rc = 0;
    struct dirent *e;
    while (rc == 0 && (e = readdir(d))) {
        if (!strcmp(e->d_name, ".") || !strcmp(e->d_name, "..")) continue;
        struct stat sb;
        rc = fstatat(dirfd(d), e->d_name, &sb, AT_SYMLINK_NOFOLLOW) != 0 ? -1 : fn(dirfd(d), e->d_name, &sb, user);
    }
    closedir(d);
    return rc;
}

typedef struct { int to; char what[256]; int err; } LinkInto;

static int link_kept(int from, const char *name, const struct stat *sb, void *user) {
    LinkInto *l = user;
    if (!S_ISREG(sb->st_mode) && !S_ISLNK(sb->st_mode)) return 0;   /* subdirectories move after the swap */
    if (linkat(from, name, l->to, name, 0) == 0) return 0;
    l->err = errno;
    snprintf(l->what, sizeof l->what, "%s", name);   /* (the entry's name is gone once the listing is closed) */
    return -1;
}

int io_dir_stage(const char *dir, char *stage, size_t stagelen, char *err, size_t errlen) {
    char target[PATH_MAX];
    int exists;
    if (dir_target(dir, target, sizeof target, &exists, err, errlen)) return -1;
    int made = -1;   /* a name nothing holds: dir.tmp.PID, else dir.tmp.PID.1, ... (never into what is there) */
    for (int k = 0; made != 0 && k < 100; k++) {
        int w = k ? snprintf(stage, stagelen, "%s.tmp.%ld.%d", target, (long)getpid(), k)
                  : snprintf(stage, stagelen, "%s.tmp.%ld", target, (long)getpid());
        if (w < 0 || (size_t)w >= stagelen) { snprintf(err, errlen, "%s: path too long", target); return -1; }
        made = mkdir(stage, 0777);
        if (made != 0 && errno != EEXIST) break;
    }
    struct stat sb;
    if (made != 0 || (exists && (stat(target, &sb) != 0 || chmod(stage, sb.st_mode & 07777) != 0))) {
        snprintf(err, errlen, "%s: cannot create %s to write it whole beside it: %s", target, stage, strerror(errno));
        if (made == 0) rmdir(stage);
        return -1;
    }
    if (!exists) return 0;
    LinkInto l = { open(stage, O_RDONLY | O_DIRECTORY | O_CLOEXEC), "", 0 };
    int rc = l.to < 0 ? -1 : each_entry(target, link_kept, &l);
    if (l.to >= 0) close(l.to);
    if (rc == 0) return 0;
    if (l.what[0]) snprintf(err, errlen, "%s/%s: cannot keep it in %s (a hard link): %s", target, l.what, stage, strerror(l.err));
    else snprintf(err, errlen, "%s: cannot read it to keep its files: %s", target, strerror(errno));
    io_dir_abandon(stage);
    return -1;
}

static int sync_written(int at, const char *name, const struct stat *sb, void *user) {
    (void)user;
    if (!S_ISREG(sb->st_mode) || sb->st_nlink > 1) return 0;   /* a kept file is the old one: on disk already */
    int fd = openat(at, name, O_RDONLY | O_CLOEXEC);
    if (fd < 0) return -1;
    int rc = fsync(fd) != 0 && errno != EINVAL ? -1 : 0;
    close(fd);
    return rc;
}

static int sync_path(const char *path) {
    int fd = open(path, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (fd < 0) return -1;
    int rc = fsync(fd) != 0 && errno != EINVAL ? -1 : 0;
    close(fd);
    return rc;
}

/* The old directory's leftovers after the swap: subdirectories moved into the new one, its links removed. */
static int clear_old(int at, const char *name, const struct stat *sb, void *user) {
    const int *to = user;
    if (S_ISDIR(sb->st_mode)) renameat2(at, name, *to, name, RENAME_NOREPLACE);
    else unlinkat(at, name, 0);
    return 0;
}

int io_dir_commit(const char *stage, const char *dir, char *err, size_t errlen) {
    char target[PATH_MAX], old[PATH_MAX + 32], parent[PATH_MAX];
    int exists;
    if (dir_target(dir, target, sizeof target, &exists, err, errlen)) return -1;
    if (each_entry(stage, sync_written, NULL) != 0 || sync_path(stage) != 0) {
        snprintf(err, errlen, "%s: cannot make its files durable: %s", stage, strerror(errno));
        return -1;
    }
    snprintf(old, sizeof old, "%s", stage);   /* after the swap the old directory is where the stage was */
    struct stat here, there;   /* saving into the working directory ("--save ."): it follows the new one */
    const int cwd = exists && stat(".", &here) == 0 && stat(target, &there) == 0 && here.st_dev == there.st_dev && here.st_ino == there.st_ino;
    if (!exists) {
        if (rename(stage, target) != 0) { snprintf(err, errlen, "%s: cannot rename %s to it: %s", target, stage, strerror(errno)); return -1; }
        old[0] = 0;
    } else if (renameat2(AT_FDCWD, stage, AT_FDCWD, target, RENAME_EXCHANGE) != 0) {
        if (errno != EINVAL && errno != ENOSYS && errno != ENOTSUP) {
            snprintf(err, errlen, "%s: cannot swap %s in: %s", target, stage, strerror(errno));
            return -1;
        }
        snprintf(old, sizeof old, "%s.old.%ld", target, (long)getpid());   /* no exchange here: two renames */
        if (rename(target, old) != 0) { snprintf(err, errlen, "%s: cannot move it aside: %s", target, strerror(errno)); return -1; }
        if (rename(stage, target) != 0) {
            const int e = errno;
            rename(old, target);
            snprintf(err, errlen, "%s: cannot rename %s to it: %s", target, stage, strerror(e));
            return -1;
        }
    }
    if (cwd && chdir(target) != 0) { snprintf(err, errlen, "%s: swapped in, but cannot enter it: %s", target, strerror(errno)); return -1; }
    snprintf(parent, sizeof parent, "%s", target);
    char *slash = strrchr(parent, '/');
    if (slash) *(slash == parent ? slash + 1 : slash) = 0;
    sync_path(slash ? parent : ".");   /* the renames themselves on disk */
    if (!old[0]) return 0;
    int to = open(target, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (to >= 0) { each_entry(old, clear_old, &to); close(to); }
    rmdir(old);   /* (a subdirectory that could not move keeps the old one there, whole) */
    return 0;
}

static int unlink_entry(int at, const char *name, const struct stat *sb, void *user) {
    (void)user;
    if (!S_ISDIR(sb->st_mode)) unlinkat(at, name, 0);
    return 0;
}

void io_dir_abandon(const char *stage) {
    each_entry(stage, unlink_entry, NULL);
    rmdir(stage);
}
