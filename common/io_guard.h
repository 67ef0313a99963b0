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
   - a directory of outputs that replaces one (--save DIR: config.json and model.safetensors, which
     only load together) is written whole beside it and swapped in by one rename (io_dir_stage,
     io_dir_commit): whatever fails, DIR holds the old set or the new one, never the new config
     beside the old weights.

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

/* A directory replaced whole. io_dir_stage makes the stage, a new directory beside dir (dir.tmp.PID: the
   same file system; dir's symlinks resolved first) holding a hard link to each regular file and
   symlink of dir, so that what the caller does not rewrite is kept (its log, tokenizer files), with
   dir's permissions; the stage's path goes to stage. The caller writes its files there, each aside and
   renamed over the link (never through it: the link is the old file). (A name already there is left
   alone: the stage is then dir.tmp.PID.1, .2, ...) io_dir_commit makes the stage
   durable (fsync of every file it wrote and of itself), swaps it with dir in one rename
   (renameat2's RENAME_EXCHANGE; where the file system has none, two renames, dir missing between
   them), then removes the old directory, its subdirectories moved into the new one first. A
   failure before the swap leaves dir as it was, and io_dir_abandon removes the stage; a process
   killed before the swap leaves dir as it was and the stage beside it. 0, or -1 with one line in err. */
int io_dir_stage(const char *dir, char *stage, size_t stagelen, char *err, size_t errlen);
int io_dir_commit(const char *stage, const char *dir, char *err, size_t errlen);
void io_dir_abandon(const char *stage);

#endif
