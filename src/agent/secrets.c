/*
 * secrets.c: the agent's in-memory store of the secret values its replicas
 * mount (a spec's `secrets:`), and the files they become inside a sandbox.
 *
 * The watcher thread fetches each value once per replica over HTTPS (GET
 * /v1/secret-values/NAME?replica=R: a node is allowed only the secrets of
 * the replicas placed on it) and puts them here; starting a replica takes
 * a private copy for the sandbox's init, which writes them into a tmpfs at
 * /run/secrets of the replica's own root (0400, its uid), read-only from
 * then on. Values never touch the node's disk, the environment or a log;
 * every copy is zeroed before it is freed.
 *
 * Shell code (a mutex; the tmpfs in the init). Bounded: at most
 * IOD_SEC_SECRETS_PER_SERVICE_MAX values per replica, IOD_SEC_SECRET_MAX
 * bytes each.
 */
#include "iod/agent_run.h"

#include <fcntl.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <unistd.h>

struct entry {
	struct entry *next;
	char replica[IOD_NAME_MAX];      /* whose */
	struct iod_agent_secret_set set; /* its values */
};

struct iod_agent_secrets {
	pthread_mutex_t mu; /* guards list */
	struct entry *list; /* one per replica */
};

void iod_agent_secret_set_clear(struct iod_agent_secret_set *s)
{
	for (uint32_t i = 0; i < s->n; i++) {
		if (s->v[i].data) {
			memset(s->v[i].data, 0, s->v[i].len);
			free(s->v[i].data);
		}
	}
	memset(s, 0, sizeof(*s));
}

int iod_agent_secret_set_add(struct iod_agent_secret_set *s, const char *name, const void *data,
                             size_t len)
{
	if (s->n >= IOD_SEC_SECRETS_PER_SERVICE_MAX || len > IOD_SEC_SECRET_MAX)
		return -E2BIG;
	if (iod_strlcpy(s->v[s->n].name, name, sizeof(s->v[s->n].name)))
		return -ENAMETOOLONG;
	s->v[s->n].data = malloc(len ? len : 1);
	if (!s->v[s->n].data)
		return -ENOMEM;
	memcpy(s->v[s->n].data, data, len);
	s->v[s->n].len = len;
	s->n++;
	return 0;
}

static int copy_set(struct iod_agent_secret_set *dst, const struct iod_agent_secret_set *src)
{
	memset(dst, 0, sizeof(*dst));
	for (uint32_t i = 0; i < src->n; i++) {
		int rc =
		    iod_agent_secret_set_add(dst, src->v[i].name, src->v[i].data, src->v[i].len);
		if (rc) {
			iod_agent_secret_set_clear(dst);
			return rc;
		}
	}
	return 0;
}

int iod_agent_secrets_new(struct iod_agent_secrets **out)
{
	struct iod_agent_secrets *s = calloc(1, sizeof(*s));
	if (!s)
		return -ENOMEM;
	pthread_mutex_init(&s->mu, NULL);
	*out = s;
	return 0;
}

void iod_agent_secrets_free(struct iod_agent_secrets *s)
{
	if (!s)
		return;
	for (struct entry *e = s->list, *n; e; e = n) {
		n = e->next;
		iod_agent_secret_set_clear(&e->set);
		free(e);
	}
	pthread_mutex_destroy(&s->mu);
	free(s);
}

static struct entry **find(struct iod_agent_secrets *s, const char *replica)
{
	struct entry **p = &s->list;
	while (*p && strcmp((*p)->replica, replica))
		p = &(*p)->next;
	return p;
}

int iod_agent_secrets_put(struct iod_agent_secrets *s, const char *replica,
                          struct iod_agent_secret_set *set)
{
	pthread_mutex_lock(&s->mu);
	struct entry **p = find(s, replica), *e = *p;
	if (!e && (e = calloc(1, sizeof(*e)))) {
		snprintf(e->replica, sizeof(e->replica), "%s", replica);
		*p = e;
	}
	if (e) {
		iod_agent_secret_set_clear(&e->set);
		e->set = *set; /* moved in */
		memset(set, 0, sizeof(*set));
	}
	pthread_mutex_unlock(&s->mu);
	return e ? 0 : -ENOMEM;
}

bool iod_agent_secrets_have(struct iod_agent_secrets *s, const char *replica)
{
	pthread_mutex_lock(&s->mu);
	bool ok = *find(s, replica) != NULL;
	pthread_mutex_unlock(&s->mu);
	return ok;
}

int iod_agent_secrets_get(struct iod_agent_secrets *s, const char *replica,
                          struct iod_agent_secret_set *out)
{
	pthread_mutex_lock(&s->mu);
	struct entry *e = *find(s, replica);
	int rc = e ? copy_set(out, &e->set) : -ENOENT;
	pthread_mutex_unlock(&s->mu);
	return rc;
}

void iod_agent_secrets_forget(struct iod_agent_secrets *s, const char *replica)
{
	pthread_mutex_lock(&s->mu);
	struct entry **p = find(s, replica), *e = *p;
	if (e) {
		*p = e->next;
		iod_agent_secret_set_clear(&e->set);
		free(e);
	}
	pthread_mutex_unlock(&s->mu);
}

int iod_agent_secrets_mount(const char *dir, const struct iod_agent_secret_set *set, uint32_t uid,
                            uint32_t gid, char *err, size_t len)
{
	char opts[96], path[IOD_AGENT_PATH_MAX * 2 + IOD_NAME_MAX];
	size_t bytes = 4096;
	for (uint32_t i = 0; i < set->n; i++)
		bytes += (set->v[i].len + 4095) / 4096 * 4096;
	if (mkdir(dir, 0500) && errno != EEXIST)
		return snprintf(err, len, "secrets: creating %s: %s", dir, strerror(errno)), -errno;
	snprintf(opts, sizeof(opts), "mode=0500,uid=%u,gid=%u,size=%zu", uid, gid, bytes);
	if (mount("tmpfs", dir, "tmpfs", MS_NOSUID | MS_NODEV | MS_NOEXEC, opts))
		return snprintf(err, len, "secrets: tmpfs on %s: %s", dir, strerror(errno)), -errno;
	for (uint32_t i = 0; i < set->n; i++) {
		snprintf(path, sizeof(path), "%s/%s", dir, set->v[i].name);
		int fd = open(path, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC | O_NOFOLLOW, 0400);
		ssize_t w = fd < 0 ? -1 : write(fd, set->v[i].data, set->v[i].len);
		int bad = fd < 0 || w != (ssize_t)set->v[i].len || fchown(fd, uid, gid);
		int why = errno;
		if (fd >= 0)
			close(fd);
		if (bad)
			return snprintf(err, len, "secrets: writing %s: %s", path, strerror(why)),
			       -why;
	}
	if (mount(NULL, dir, NULL, MS_REMOUNT | MS_RDONLY | MS_NOSUID | MS_NODEV | MS_NOEXEC, opts))
		return snprintf(err, len, "secrets: making %s read-only: %s", dir, strerror(errno)),
		       -errno;
	return 0;
}
