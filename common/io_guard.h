/* io_guard.h — the one place every program (the trainers, the tools, the suite) opens its input files
   and checks its output paths, so that hostile paths fail with one line instead of hanging or
   destroying data:

   - an input that is not a regular file (a FIFO, a directory, a device) is refused before anything
     reads it: it is opened with O_NONBLOCK, so that a FIFO without a writer cannot block open(), and
     checked with fstat;
   - a small input is read as a stream (read() to the end), not by its st_size, so that a pseudo-file
     such as /proc/self/status, whose size reads 0, is read for what it holds;
   - an output path that names an input (the same inode; for a file not created yet, the same
     directory and name) or another output of the same run is refused before anything is written.

   - a small output that replaces a file (config.json over the checkpoint it was read from) is written
     whole beside it and renamed over it (io_replace_file): a full disk or a file-size limit leaves
     the old file as it was, never a truncated one.

   It does not open other outputs (each program does, once this check passed) or lock files. */
#ifndef IO_GUARD_H
#define IO_GUARD_H

#include <stddef.h>
#include <sys/stat.h>

/* Opens a regular file for reading: 0 with *fd (blocking reads, O_CLOEXEC) and *st, or -1 with
   "PATH: not a regular file (a FIFO)" / "PATH: No such file or directory" in err. */
int io_open_input(const char *path, int *fd, struct stat *st, char *err, size_t errlen);

/* The whole of a regular file, read to its end (at most `limit` bytes; more is an error naming the
   limit), NUL-terminated for convenience: 0 with *data (malloc'ed) and *n, or -1 with a one-line
   reason ("PATH: larger than 1 MiB", "PATH: out of memory"). */
int io_read_file(const char *path, size_t limit, char **data, size_t *n, char *err, size_t errlen);

/* One path of a run: what names it in messages ("--log", "--data", "--init-from's config.json"),
   and whether the run writes it. */
typedef struct {
    const char *path;
    const char *what;
    int output;
} IoPath;

/* 0 when no output is an input or another output; else -1 with one line such as
   "--log tok.bin is the same file as --data tok.bin: refusing to write over it". Paths that are
   NULL or "-" (stdout) are skipped. */
int io_check_outputs(const IoPath *paths, int n, char *err, size_t errlen);

/* Writes data[0..n) to path: into a new file beside it (path.tmp.PID), then renamed over path, so
   that path holds either its old bytes or all the new ones. 0, or -1 with "PATH: write failed: No
   space left on device" (or "cannot create") in err; the file aside is removed on failure. */
int io_replace_file(const char *path, const void *data, size_t n, char *err, size_t errlen);

#endif
