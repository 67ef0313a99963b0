/* threadtracks.h — the OS threads of a log, one track each. The kit hands the index (and chunk) of a
   thread that exited to the next new thread, which announces itself by a THREAD event
   (docs/LOG_FORMAT.md): one thread index may stand for several threads one after the other. A reader
   that keys on the index pools them (one lane, one name: the last); a track is one OS thread.

   Numbered as dpmem-trace numbers its tracks, so that a picture, a report and a trace name a thread
   alike: the first OS thread of an index has the index as its tid, each later one a fresh tid above
   every index, in the order they appear. A track's name is the last its thread gave itself
   (dpmem_thread_name), else "". Feed every event of one pass to tracks_event, in the reader's order. */
#ifndef THREADTRACKS_H
#define THREADTRACKS_H

#include <stdint.h>

#include "dpmem_read.h"

typedef struct {
    uint32_t slot;            /* its slot in DpmemLog.threads */
    uint32_t tid;             /* its number, as dpmem-trace gives it */
    uint64_t os_tid;
    char name[64];
} ThreadTrack;

typedef struct {
    ThreadTrack *t;
    uint32_t n, cap;
    uint32_t *cur;            /* per slot: its track now */
    uint8_t *named;           /* per slot: a THREAD event seen */
    uint32_t next_tid;
} ThreadTracks;

/* One track per slot to begin with. 0, or -1 (out of memory). */
int  tracks_init(ThreadTracks *T, const DpmemLog *L);
/* The track of event e (a THREAD event of a new OS thread on its index opens a new track first).
   UINT32_MAX: out of memory (the caller stops). */
uint32_t tracks_event(ThreadTracks *T, const DpmemEvent *e);
/* "T3 worker-1", or "T3" for a thread without a name. */
const char *tracks_label(const ThreadTracks *T, uint32_t track, char *buf, int n);
void tracks_free(ThreadTracks *T);

#endif
