/*
 * internal.h: private structures of the state machine and the server shell.
 * Only the files under src/state include it.
 */
#ifndef IOD_STATE_INTERNAL_H
#define IOD_STATE_INTERNAL_H

#include "iod/state.h"

/* One object: a JSON value under kind/name with its revisions. */
struct iod_state_obj {
	struct iod_state_obj *next; /* hash chain */
	enum iod_state_kind kind;   /* what it is */
	char name[IOD_NAME_MAX];    /* unique within its kind */
	uint64_t rev;               /* revision of the last change (CAS compares this) */
	uint64_t create_rev;        /* revision that created it */
	uint64_t lease;             /* lease id it dies with, 0 = none */
	json_t *value;              /* the document (owned reference) */
	size_t bytes;               /* its compact JSON size, for the bytes quota */
};

enum { IOD_STATE_EV_PUT = 1, IOD_STATE_EV_DELETE = 2 };

/* One change, for watches. */
struct iod_state_event {
	uint64_t rev;             /* revision that made it */
	uint8_t type;             /* IOD_STATE_EV_PUT / _DELETE */
	enum iod_state_kind kind; /* object kind */
	char name[IOD_NAME_MAX];  /* object name */
	json_t *value;            /* put: the new value (reference); delete: NULL */
};

/* A lease: objects attached to it are deleted when it expires. */
struct iod_state_lease {
	uint64_t id;          /* assigned by grant, increasing */
	uint64_t ttl_ms;      /* renew sets deadline = now + ttl */
	uint64_t deadline_ms; /* Unix ms, in the leader's clock that granted/renewed */
	uint64_t owner;       /* hash of the granting client's subject, 0 = unknown */
	bool node;            /* a node agent's lease: from the reserved pool */
};

struct iod_state {
	struct iod_state_obj **buckets;       /* chained hash table, power-of-two size */
	uint32_t buckets_n;                   /* buckets */
	uint32_t count[IOD_STATE_KIND_COUNT]; /* objects per kind */
	uint32_t total;                       /* objects in all */
	uint64_t bytes;                       /* their values' compact JSON bytes */
	uint64_t bytes_max;                   /* quota (IOD_STATE_BYTES_MAX; tests lower it) */
	uint64_t rev;                         /* cluster revision */
	uint64_t next_lease;                  /* id the next grant gets */
	struct iod_state_lease *leases;       /* IOD_STATE_LEASES_MAX slots, sorted by id */
	uint32_t leases_n;                    /* leases in use */
	struct iod_state_event *hist;         /* ring of IOD_STATE_HISTORY_MAX events */
	uint32_t hist_head;                   /* oldest event */
	uint32_t hist_n;                      /* events in the ring */
	uint64_t hist_floor;                  /* watches must start at or after this revision */
};

struct iod_state_obj *iod_state_find(const struct iod_state *s, enum iod_state_kind k,
                                     const char *name);
/* A value's size as the bytes quota counts it (compact JSON). */
size_t iod_state_value_bytes(const json_t *v);
struct iod_state_lease *iod_state_lease_find(const struct iod_state *s, uint64_t id);
/* Objects of kind (or all when kind < 0) sorted by kind then name: a
 * malloc'd array in *out; returns the count (count > 0 with *out NULL means
 * out of memory). */
uint32_t iod_state_sorted(const struct iod_state *s, int kind, struct iod_state_obj ***out);
json_t *iod_state_obj_json(const struct iod_state_obj *o);

/* ---- iod's Raft I/O: the log on disk (wal.c) and raft_io (rio.c) ------- */

struct raft_configuration;
struct raft_snapshot;
struct raft_entry;
struct raft_io;

/* What iod_wal_open read, handed to raft by raft_io->load. */
struct iod_wal_load {
	uint64_t term;                  /* stored current term */
	uint64_t vote;                  /* stored vote */
	struct raft_snapshot *snapshot; /* newest snapshot or NULL (raft_malloc'd) */
	uint64_t start_index;           /* index of entries[0] */
	struct raft_entry *entries;     /* raft_malloc'd, each buf raft_malloc'd */
	size_t n;                       /* entries */
	uint64_t torn_bytes;            /* an interrupted write's bytes dropped (0: none) */
};

/* The file system under the log (walfs.c): handles are small ints, errors
 * negative errnos. Directory handles take sync and close too. */
enum iod_walfs_mode {
	IOD_WALFS_READ,   /* O_RDONLY */
	IOD_WALFS_WRITE,  /* O_RDWR, the file exists */
	IOD_WALFS_CREATE, /* O_WRONLY | O_CREAT | O_TRUNC */
};
struct iod_walfs_ops {
	int (*dir_open)(struct iod_walfs *fs, const char *path); /* a handle */
	int (*list)(struct iod_walfs *fs, int dir, int (*cb)(void *arg, const char *name),
	            void *arg); /* without "." and ".."; cb's error stops it */
	int (*open)(struct iod_walfs *fs, int dir, const char *name, enum iod_walfs_mode mode);
	int (*size)(struct iod_walfs *fs, int fd, uint64_t *out);
	ssize_t (*read)(struct iod_walfs *fs, int fd, void *buf, size_t len, uint64_t off);
	int (*write)(struct iod_walfs *fs, int fd, const void *buf, size_t len,
	             uint64_t off);                                /* all of it */
	int (*sync)(struct iod_walfs *fs, int fd, bool data_only); /* fdatasync / fsync */
	int (*truncate)(struct iod_walfs *fs, int fd, uint64_t len);
	/* make the file at least len bytes, the new ones zero (fallocate):
	 * durable at the next sync; 0 without doing it where unsupported */
	int (*allocate)(struct iod_walfs *fs, int fd, uint64_t len);
	int (*rename)(struct iod_walfs *fs, int dir, const char *from, const char *to);
	int (*unlink)(struct iod_walfs *fs, int dir, const char *name);
	void (*close)(struct iod_walfs *fs, int fd);
};
struct iod_walfs {
	const struct iod_walfs_ops *ops; /* the implementation */
};
/* The names in dir, malloc'd (iod_walfs_names_free). */
int iod_walfs_list(struct iod_walfs *fs, int dir, char ***names, size_t *n);

struct iod_wal;
/* Open and verify the log in dir; repair a torn tail of the open segment;
 * any other damage: -EUCLEAN with the file, offset and reason in e. */
int iod_wal_open(struct iod_wal **out, const char *dir, struct iod_wal_load *ld, struct iod_err *e);
/* The same on another file system (tests, the simulator: a memory one). */
int iod_wal_open_fs(struct iod_wal **out, struct iod_walfs *fs, const char *dir,
                    struct iod_wal_load *ld, struct iod_err *e);
void iod_wal_close(struct iod_wal *w);
/* Free what a load holds (entries, their buffers, the snapshot); zeroes it. */
void iod_wal_load_free(struct iod_wal_load *ld);
/* Tests: roll segments sooner than IOD_RAFT_SEGMENT_BYTES. */
void iod_wal_set_segment_bytes(struct iod_wal *w, uint64_t bytes);
/* Preallocate the open segment to the segment size (fallocate, then write
 * in place): an append's fdatasync then does not change the file's size.
 * Off by default (the simulator's disks); rio.c turns it on. Loading does
 * not depend on it: a zero tail after the last record is always the end. */
void iod_wal_set_prealloc(struct iod_wal *w, bool on);
bool iod_wal_empty(const struct iod_wal *w);
uint64_t iod_wal_next_index(const struct iod_wal *w);
void iod_wal_meta(const struct iod_wal *w, uint64_t *term, uint64_t *vote);
int iod_wal_meta_set(struct iod_wal *w, uint64_t term, uint64_t vote);
int iod_wal_append(struct iod_wal *w, const struct raft_entry *es, unsigned n);
int iod_wal_truncate(struct iod_wal *w, uint64_t index);
int iod_wal_snapshot_put(struct iod_wal *w, unsigned trailing, const struct raft_snapshot *s);
int iod_wal_snapshot_get(struct iod_wal *w, struct raft_snapshot **out, struct iod_err *e);
void iod_wal_snapshot_free(struct raft_snapshot *s);
int iod_wal_bootstrap(struct iod_wal *w, const struct raft_configuration *conf);
/* The configuration as snapshots and the transport carry it. */
size_t iod_raft_conf_size(const struct raft_configuration *c);
void iod_raft_conf_encode(const struct raft_configuration *c, unsigned char *p);
int iod_raft_conf_decode(const unsigned char *p, size_t len, struct raft_configuration *c);

/* vote.c: does this server leave a pre-vote request unanswered (the
 * tie-break between two pre-candidates; member_io.c)? */
struct iod_prevote_view {
	bool self_pre_candidate;  /* this server is a candidate in its pre-vote phase */
	bool self_candidate;      /* ... a candidate past it (it voted for itself) */
	uint64_t self_term;       /* its current term */
	uint64_t self_id;         /* its id */
	uint64_t self_last_index; /* its last stored entry (what its requests name) */
	uint64_t self_last_term;  /* that entry's term */
	bool pre_vote;            /* the request is a pre-vote */
	bool disrupt_leader;      /* ... allowed to disrupt a leader (a transfer) */
	uint64_t from_id;         /* the requester */
	uint64_t from_term;       /* the term the request names */
	uint64_t from_last_index; /* its last stored entry, as the request says */
	uint64_t from_last_term;  /* that entry's term */
	bool refused_self;        /* the requester refused this server's latest pre-vote */
};
bool iod_raft_prevote_yield(const struct iod_prevote_view *v);

/* --recover-from-peers: a peer's log copy (rio.c) summarised, this
 * server's own files moved to DIR/damaged-<unix time>/ (where: that path,
 * "" if there were none), and the log rebuilt from the copy at a term above
 * min_term and the peer's, with the vote for self_id. */
int iod_wal_copy_summary(const unsigned char *b, size_t len, uint64_t *term, uint64_t *last_index,
                         uint64_t *last_term);
uint64_t iod_wal_peek_term(const char *dir);
int iod_wal_set_aside(const char *dir, char *where, size_t where_cap, struct iod_err *e);
int iod_wal_rebuild(const char *dir, const unsigned char *b, size_t len, uint64_t self_id,
                    uint64_t min_term, struct iod_err *e);
/* tls: the server's Raft credentials (NULL = plaintext): the peer must
 * present a server certificate of the cluster. */
int iod_rio_fetch_log(const char *peer_addr, uint64_t self_id, const char *self_addr,
                      struct iod_sec_tls_creds *tls, uint32_t timeout_ms, unsigned char **blob,
                      size_t *blob_len, struct iod_err *e);

/* recover.c: the whole of --recover-from-peers, before the node starts. */
int iod_raft_member_recover_from_peers(const struct iod_server_config *c, struct iod_err *e);

struct uv_loop_s;
/* iod's raft_io: the log in dir (opened and verified now, so damage is
 * reported before raft starts) and a TCP transport bound to addr now (a
 * taken port is reported with its reason). tls (not owned; NULL =
 * plaintext, refused unless addr is a loopback address): every connection,
 * both ways, is mutual TLS, and a peer must present the certificate of a
 * server of the cluster (spiffe://<cluster>/server/<id>, its id the one its
 * handshake names) before any Raft message is read from it or sent to it. */
int iod_rio_init(struct raft_io *io, struct uv_loop_s *loop, const char *dir, const char *addr,
                 struct iod_sec_tls_creds *tls, uint32_t connect_retry_ms, struct iod_err *e);
/* After raft_close's callback (or when raft never started). */
void iod_rio_free(struct raft_io *io);
/* Large commands parsed on the log's worker after their write: ready gets
 * each (owned) on the loop before raft hears of the append; flush when the
 * log is truncated or a snapshot installed (kept ones must go). */
struct iod_rio_prep {
	void *data;                                               /* their argument */
	void (*ready)(void *data, struct iod_state_preparsed *p); /* NULL: off */
	void (*flush)(void *data);
};
void iod_rio_set_prep(struct raft_io *io, const struct iod_rio_prep *p);
/* `iod revoke server ID`: fn says whether server (its certificate's name,
 * the id) is revoked; such a certificate is refused at the handshake, both
 * ways, and established connections with it are closed within
 * IOD_RAFT_SWEEP_MS. */
void iod_rio_set_revoked(struct raft_io *io, bool (*fn)(void *data, const char *server),
                         void *data);

#endif
