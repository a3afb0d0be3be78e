/*
 * server_job.c: work off the loop. Lists are copied on the loop, then
 * sorted and serialised on libuv's pool; deploy plans are made there too
 * (iod_ctrl_deploy_plan_view), one at a time, and only their command is
 * proposed on the loop. A job never touches its request from the worker.
 */
#include "server_internal.h"

/* ---- work off the loop: lists ------------------------------------------- */

static void job_unlink(struct server *s, struct job *j)
{
	if (j->prev)
		j->prev->next = j->next;
	else
		s->jobs = j->next;
	if (j->next)
		j->next->prev = j->prev;
	else
		s->jobs_tail = j->prev;
	j->prev = j->next = NULL;
}

/* Pool thread: only the job's own copy is touched. The text is written
 * after room for a shared_text header, which then becomes the answer
 * without a copy. */
static void job_work(uv_work_t *w)
{
	struct job *j = w->data;
	uint64_t t0 = iod_clock_now_ns();
	struct iod_buf b;
	static const char hdr[offsetof(struct shared_text, data)];

	if (j->deploy) {
		j->rc = iod_ctrl_deploy_plan_view(&j->view, j->body.data, j->body.len, &j->cmd,
		                                  &j->plan, &j->err);
		iod_ctrl_view_free(&j->view);
		j->worker_us = (iod_clock_now_ns() - t0) / 1000;
		return;
	}
	if (j->parse) {
		struct iod_err e = {0};
		json_t *v = NULL;
		if (iod_json_parse(j->body.data, j->body.len, &v, &e))
			j->parse_err = api__err_json("%s", e.msg);
		else if (j->txn)
			j->cmd = api__txn_encode(v, &j->txn_status, &j->parse_err);
		else
			j->parsed = v;
		/* a put's command too (a 512 KiB value's dump is ~1 ms): the loop
		 * validates the value and proposes this text */
		if (j->put && j->parsed && json_is_object(j->parsed))
			j->cmd = iod_state_cmd_put(j->put_kind, j->put_name, j->parsed,
			                           j->put_lease, j->put_prev);
		j->worker_us = (iod_clock_now_ns() - t0) / 1000;
		return;
	}
	iod_buf_init(&b);
	int rc = iod_buf_append(&b, hdr, sizeof(hdr)); /* the dump releases the items anyway */
	rc = iod_state_items_dump(j->kind, j->rev, j->items, (uint32_t)j->n, j->limit, &b) || rc;
	j->items = NULL;
	if (!rc) {
		struct shared_text *t =
		    (struct shared_text *)(void *)b.data; /* malloc'd: aligned */
		t->refs = 1;
		t->len = b.len - sizeof(hdr);
		j->text = t;
	} else {
		iod_buf_free(&b);
	}
	j->worker_us = (iod_clock_now_ns() - t0) / 1000;
}

void api__deploy_turn_end(struct server *s)
{
	s->deploy_busy = false;
}

/* A deploy plan is back: hand it to its request, which the handler routes
 * again (do_deploy proposes it), or drop it with the deploy turn. */
static void job_deploy_end(struct server *s, struct job *j)
{
	struct req *q = j->q;
	if (!q) {
		if (j->running)
			api__deploy_turn_end(s);
	} else {
		q->job = NULL;
		iod_buf_free(&q->body);
		q->body = j->body; /* back: a rerun (held, then a leader) plans again */
		iod_buf_init(&j->body);
		q->planned = true;
		q->deploy_turn = j->running;
		q->plan_rc = j->running ? j->rc : -ENOMEM;
		q->plan_cmd = j->cmd;
		j->cmd = NULL;
		json_decref(q->extra);
		q->extra = j->plan;
		j->plan = NULL;
		iod_strlcpy(q->plan_msg, j->running ? j->err.msg : "out of memory",
		            sizeof(q->plan_msg));
		if (q->suspended) {
			q->suspended = false;
			MHD_resume_connection(q->conn);
			api__mhd_kick(s);
		}
	}
	iod_ctrl_view_free(&j->view);
	iod_buf_free(&j->body);
	free(j->cmd);
	json_decref(j->plan);
	free(j);
}

/* A large body is back from its parse: hand the result to its request,
 * which the handler routes again (do_put, do_txn take it), or drop it. */
static void job_parse_end(struct server *s, struct job *j)
{
	struct req *q = j->q;
	if (q) {
		q->job = NULL;
		iod_buf_free(&q->body);
		q->body = j->body; /* back: the audit and a rerun see it */
		iod_buf_init(&j->body);
		q->parsed = true;
		q->body_value = j->parsed;
		q->body_error = j->parse_err ? j->parse_err
		                             : (j->running ? NULL : api__err_json("out of memory"));
		free(q->body_cmd); /* a rerun's */
		q->body_cmd = j->cmd;
		q->txn_status = j->txn && !j->cmd ? (j->txn_status ? j->txn_status : 500) : 0;
		j->parsed = j->parse_err = NULL;
		j->cmd = NULL;
		if (q->suspended) {
			q->suspended = false;
			MHD_resume_connection(q->conn);
			api__mhd_kick(s);
		}
	}
	iod_buf_free(&j->body);
	json_decref(j->parsed);
	json_decref(j->parse_err);
	free(j->cmd);
	free(j);
}

/* Answer a job's request (if it still has one) and free the job. */
static void job_end(struct server *s, struct job *j)
{
	job_unlink(s, j);
	if (j->deploy) {
		job_deploy_end(s, j);
		return;
	}
	if (j->parse) {
		job_parse_end(s, j);
		return;
	}
	if (j->q) {
		struct req *q = j->q;
		q->job = NULL;
		if (j->text) {
			q->answer_text = j->text; /* the job's reference */
			j->text = NULL;
			s->requests[200]++;
			api__finish(q, 200, NULL);
		} else {
			api__finish(q, 500,
			            api__err_json("out of memory listing %s",
			                          iod_state_kind_name(j->kind)));
		}
	}
	api__shared_unref(j->text);
	for (int i = 0; j->items && i < j->n; i++)
		json_decref(j->items[i].value);
	free(j->items);
	free(j);
}

static void job_after(uv_work_t *w, int status)
{
	struct job *j = w->data;
	struct server *s = j->srv;
	(void)status;
	IOD_ASSERT(s->jobs_running > 0);
	s->jobs_running--;
	if (j->deploy) {
		s->deploys_planned++;
		if (j->worker_us > s->deploy_max_us)
			s->deploy_max_us = j->worker_us;
	} else if (j->parse) {
		s->bodies_parsed++;
	} else {
		s->jobs_done++;
		if (j->worker_us > s->job_max_us)
			s->job_max_us = j->worker_us;
	}
	job_end(s, j);
	api__job_start_next(s);
}

/* Start waiting jobs while fewer than IOD_API_JOBS_MAX run: copy the
 * objects now (the answer is the state when its turn came, which is after
 * the request arrived, so still a correct read), sort and serialise there. */
void api__job_start_next(struct server *s)
{
	for (struct job *j = s->jobs, *next; j && s->jobs_running < IOD_API_JOBS_MAX; j = next) {
		next = j->next;
		if (j->running || (j->deploy && s->deploy_busy))
			continue;
		const struct iod_state *st = iod_raft_member_state(s->node);
		j->w.data = j;
		if (j->deploy) {
			/* one deploy at a time, planned against the state that its
			 * predecessor's write has been applied to */
			if (iod_ctrl_view_take(st, &j->view) ||
			    uv_queue_work(&s->loop, &j->w, job_work, job_after)) {
				job_end(s, j); /* not running: 500 */
				continue;
			}
			s->deploy_busy = true;
		} else if (j->parse) {
			if (uv_queue_work(&s->loop, &j->w, job_work, job_after)) {
				job_end(s, j); /* not running: 500 */
				continue;
			}
		} else {
			j->rev = iod_state_rev(st);
			j->n = iod_state_items(st, j->kind, j->after, &j->items);
			if (j->n < 0 || uv_queue_work(&s->loop, &j->w, job_work, job_after)) {
				if (j->n < 0)
					j->n = 0;
				job_end(s, j); /* no text: 500 */
				continue;
			}
		}
		j->running = true;
		s->jobs_running++;
	}
}

/* Queue j for q (suspended until it is answered). */
static MHD_RESULT job_queue(struct req *q, struct job *j)
{
	struct server *s = q->srv;
	j->srv = s;
	j->q = q;
	j->prev = s->jobs_tail;
	if (s->jobs_tail)
		s->jobs_tail->next = j;
	else
		s->jobs = j;
	s->jobs_tail = j;
	q->job = j;
	if (!q->suspended) {
		q->suspended = true;
		MHD_suspend_connection(q->conn);
	}
	api__job_start_next(s);
	return MHD_YES;
}

static MHD_RESULT job_oom(struct req *q)
{
	if (q->suspended) {
		api__finish(q, 500, api__err_json("out of memory"));
		return MHD_YES;
	}
	return api__queue_err(q->srv, q->conn, 500, api__err_json("out of memory"));
}

/* Queue a list for q. */
MHD_RESULT api__job_list(struct req *q, enum iod_state_kind k)
{
	struct job *j = calloc(1, sizeof(*j));
	if (!j)
		return job_oom(q);
	j->kind = k;
	j->limit = q->list_limit;
	memcpy(j->after, q->list_after, sizeof(j->after));
	return job_queue(q, j);
}

/* Queue the parse of q's large body (it moves to the job). */
static struct job *job_parse_new(struct req *q, bool txn)
{
	struct job *j = calloc(1, sizeof(*j));
	if (!j)
		return NULL;
	j->parse = true;
	j->txn = txn;
	j->body = q->body;
	iod_buf_init(&q->body);
	return j;
}

MHD_RESULT api__job_parse(struct req *q, bool txn)
{
	struct job *j = job_parse_new(q, txn);
	return j ? job_queue(q, j) : job_oom(q);
}

/* ... a put's body, with its command encoded there too (q->body_cmd) */
MHD_RESULT api__job_parse_put(struct req *q, enum iod_state_kind k, const char *name,
                              uint64_t lease, int64_t prev)
{
	struct job *j = job_parse_new(q, false);
	if (!j)
		return job_oom(q);
	j->put = true;
	j->put_kind = k;
	iod_strlcpy(j->put_name, name, sizeof(j->put_name));
	j->put_lease = lease;
	j->put_prev = prev;
	return job_queue(q, j);
}

/* Queue q's deploy plan (its body moves to the job). */
MHD_RESULT api__job_deploy(struct req *q)
{
	struct job *j = calloc(1, sizeof(*j));
	if (!j)
		return job_oom(q);
	j->deploy = true;
	j->body = q->body;
	iod_buf_init(&q->body);
	return job_queue(q, j);
}

/* A request that goes away (or a server that stops) leaves its job: a
 * waiting one is dropped, a running one finishes without answering. */
void api__job_detach(struct req *q)
{
	struct job *j = q->job;
	if (!j)
		return;
	q->job = NULL;
	j->q = NULL;
	if (!j->running)
		job_end(q->srv, j);
}
