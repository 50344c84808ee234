"""Every number the specification fixes, named once. Each has a boundary test."""

from __future__ import annotations

# Capture (spec: What Is Captured; Capture and Recovery; Storage)
SOURCE_MAX_BYTES = 32 * 1024  # redacted turn source bound, UTF-8 bytes
ACTIVE_JOBS_PER_PROJECT = 64  # admission cap; exhausted jobs do not count
# jobs a forget deleted whose ids a project keeps, newest (a turn reported again under one makes
# no job: its fact stays forgotten)
FORGOTTEN_JOBS_KEPT = 4096
LEDGER_MAX_CANDIDATES = 128  # newest candidates kept in candidates.jsonl
MARKDOWN_MAX_CANDIDATES = 64  # newest candidates shown in auto-memory.md
COMMITTED_JOBS_KEPT = 128  # newest committed job files kept
# newest exhausted or cancelled job files kept per project, as evidence of what failed (the spec
# bounds committed ones only; a provider down for weeks would otherwise keep every turn's text)
ENDED_JOBS_KEPT = 128
DEFAULT_MAX_RETRIES = 3  # failed attempts retried up to this many times
# a daemon that dies holding a job's lease (killed, the machine off) costs the job no attempt;
# the job whose lease this many daemons in a row died holding ends exhausted, so a job whose run
# kills orcad itself cannot have it die at every start for good (well above what a storm of
# kills right after start does to an innocent job: five in a row in tests/test_crash.py)
RECOVERIES_MAX = 8
DEFAULT_RESCHEDULE_S = 30.0  # back-off after a transient job-store or lock failure
DEFAULT_RETRY_BASE_S = 2.0  # first wait after a failed attempt; doubles per failure (jittered)
DEFAULT_RETRY_MAX_S = 300.0  # longest wait between two attempts of one job
CONFIG_SECONDS_MAX = 365 * 24 * 3600.0  # longest duration a config key takes (now + it is a date)
LEASE_RENEW_FRACTION = 3  # a lease is renewed every lease_s / 3 by wall clock
# the shortest lease_s config takes: a claim and its renewals write the job file, so a lease
# much shorter ran out before the worker could use it, and each turn's job was exhausted
LEASE_S_MIN = 1.0
# no lease or wait before a retry orcad sets ends further ahead (lease_s, retry_max_s: config;
# jobs.claim's lease_s: a day; Retry-After: an hour), give or take float rounding; one that does
# was edited in by hand
JOB_WAIT_MAX_S = CONFIG_SECONDS_MAX + 1.0

# Extractor output (orcad/capture/output.py)
EXTRACTOR_MAX_FACTS = 8
EXTRACTOR_FACT_MAX_CHARS = 400
EXTRACTOR_OUTPUT_MAX_BYTES = 16 * 1024

# Recall (spec: Recall; deliberate spec: How one turn retrieves memory)
RECALL_BARRIER_S = 5.0
RECALL_AUTOMATIC_MAX_ENTRIES = 6
RECALL_AUTOMATIC_MAX_BYTES = 3072
RECALL_DELIBERATE_MAX_RECORDS = 8
RECALL_DELIBERATE_MAX_CHARS = 4096
QUERY_MAX_TERMS = 12
QUERY_MAX_CONSIDERED = 64  # distinct prompt terms among which the most selective 12 are kept
RECALL_BACKFILL_BATCH = 64  # records embedded per background step (the store thread is shared)
# deliberate records paired with those they correct per background step (about 1.4 ms each at
# 10k records, on the store's thread, which a recall waits for: 4 a step hold it some 7 ms,
# 16 some 23 ms, and a pass takes as long either way)
RECALL_LINK_BATCH = 4
RECALL_BACKFILL_IDLE_S = 0.5  # pause of the background embedding when nothing needs a vector
# its pause after a pass that failed doubles up to this (a full disk, a damaged table)
RECALL_BACKFILL_FAILING_MAX_S = 30.0
# a record the model refuses (an endpoint's 400 for a text too long for it) while it embeds
# others is left to its words for this long, then tried again: it must not hold up the rest
RECALL_BACKFILL_REFUSED_RETRY_S = 600.0
# the embedding model loads this long after the daemon serves (or at the first recall, if
# sooner): loading holds the interpreter lock and would slow the start it overlaps
RECALL_MODEL_LOAD_DELAY_S = 0.5
# an embedding endpoint that failed is not asked again for this long, doubled after each
# failure in a row up to the maximum: one that hangs would cost its deadline on every recall
EMBEDDING_COOLDOWN_S = 1.0
EMBEDDING_COOLDOWN_MAX_S = 30.0
# the least an endpoint gets for one batch of the background embedding (recall's own deadline,
# set for one prompt, would cut a batch every time on a slow server)
EMBEDDING_BACKGROUND_TIMEOUT_S = 5.0
# an endpoint's answer is read up to this much a text, plus the base (a vector of 8,192 numbers
# as JSON takes about 200 KiB): a larger one is a failure, not something to hold in memory
EMBEDDING_ANSWER_BYTES_PER_TEXT = 256 * 1024
EMBEDDING_ANSWER_BASE_BYTES = 64 * 1024
VECTOR_MATRIX_REFRESH_S = 1.0  # deliberate vectors in memory are reloaded at most this often

# Recall snapshots (spec: a provider continuation keeps the original turn's recall)
RECALL_SNAPSHOTS_IN_MEMORY = 1024  # newest (session, turn) snapshots answered from memory
RECALL_SNAPSHOTS_PERSISTED = 4096  # newest snapshots kept in the daemon state database

# Explicit facts (spec: /remember; loaded with bounded size at session startup)
STARTUP_USER_MAX_BYTES = 8192  # user.md bytes handed to a new session (newest lines kept)
STARTUP_PROJECT_MAX_BYTES = 8192  # the project's memory.md bytes handed to a new session
EXPLICIT_FACT_MAX_CHARS = 2000  # one remembered fact, after trimming

# Deliberate memory search (deliberate spec: Inspect and manage records)
SEARCH_LIMIT_MIN = 1
SEARCH_LIMIT_MAX = 20
SEARCH_LIMIT_DEFAULT = 8
MEMORY_CONTENT_MAX_CHARS = 4096  # one record, trimmed: no record may exceed the recall budget
AUTO_REVIEW_MAX_CHARS = 1000  # auto mode's review refuses longer content as not one short fact
APPROVAL_TTL_S = 300.0  # a pending memory change waits this long for memory.approve
# pending memory changes waiting for memory.approve, of all sessions and of one: a change
# beyond either is refused (busy), none waiting is dropped to make room; except that past
# PENDING_APPROVALS_MAX a session with none waiting may still propose one, up to the ceiling
PENDING_APPROVALS_MAX = 256
PENDING_APPROVALS_PER_SESSION = 16
PENDING_APPROVALS_CEILING = 512

# A config.toml (the user's, a trusted project's) larger than this is refused unread: it is
# read again at each session open, and 100 MB of it made each open take 1.4 s and 300 MB
CONFIG_FILE_MAX_BYTES = 1024 * 1024

# A .git file, commondir or config is read this far at most to find a project's origin
GIT_FILE_MAX_BYTES = 1024 * 1024
# the longest cwd looked up, in UTF-8 bytes: Linux's PATH_MAX, which no path the kernel takes and
# no getcwd reaches; resolving a longer one component by component takes time growing with the
# square of its length (hours for a few MiB), in a thread a stop waits for
CWD_MAX_BYTES = 4096

# Sessions: one whose clients have all gone quiet this long stops counting as open
DEFAULT_SESSION_IDLE_EXPIRY_S = 3600.0
# A session's row (its epoch and snapshot) is deleted once no call has touched it this long
# (or twice the idle expiry, if longer); the sweep runs this often, deleting this many at most
SESSION_ROW_RETENTION_S = 30 * 24 * 3600.0
SESSION_SWEEP_INTERVAL_S = 3600.0
SESSION_SWEEP_MAX_ROWS = 1000
# after a pass that deleted SESSION_SWEEP_MAX_ROWS, the next comes this soon: a script that opens
# more sessions an hour than a pass deletes would otherwise outgrow the sweep for good
SESSION_SWEEP_CATCH_UP_S = 1.0
# The time of a session's last call is stored once the stored one trails it by this much (and
# at a clean stop): after a crash, the idle expiry counts from at most this long before it
SESSION_LAST_USE_WRITE_S = 60.0

# Wire (the README's [server] settings)
DEFAULT_MAX_MESSAGE_BYTES = 8 * 1024 * 1024
DEFAULT_MAX_CONNECTIONS = 256
DEFAULT_IDLE_TIMEOUT_S = 600.0
DEFAULT_SEND_TIMEOUT_S = 30.0  # a client that takes no answer for this long is disconnected
DEFAULT_REQUEST_LINE_TIMEOUT_S = 30.0  # a request line must be complete this long after its start
# the connection sweep runs at a quarter of its shortest timeout, but never more often than this
CONNECTION_SWEEP_MIN_S = 0.05
MAX_ANSWERS_OWED_PER_CONNECTION = 64  # then the connection is not read until its client reads
# and so when its requests owed an answer add up to this many times server.max_message_bytes:
# two requests of the largest size may be pipelined before an answer is read
REQUEST_LINES_OWED_PER_CONNECTION = 2
# what all connections together may hold of what their clients sent (requests owed an answer,
# lines not yet complete) before those whose client has left an answer unread or a line
# unfinished for SHED_AFTER_S are closed, longest first, until they hold less
DEFAULT_MAX_BUFFERED_BYTES = 64 * 1024 * 1024
SHED_AFTER_S = 0.5
# a batch is answered as one line by one task: its size bounds that answer and that task's time
MAX_BATCH_REQUESTS = 64
MAX_JSON_NESTING = 64  # deeper arrays/objects are refused before any decoder recurses
BUSY_ANSWER_WAIT_S = 1.0  # how long the "busy" answer to a refused connection may take to send
# at max_connections, a connection whose answer has waited this long for its client to read it
# may be closed for a newcomer, when no connection owes nothing
EVICT_UNREAD_AFTER_S = 1.0
SHUTDOWN_GRACE_S = 5.0  # in-flight requests get this long to finish on SIGTERM

# Waits and back-offs (spec: Capture and Recovery; Storage). Each is named once, here.
SQLITE_BUSY_TIMEOUT_MS = 5000  # a store waits this long for another connection's write lock
INDEX_BUSY_TIMEOUT_MS = 2000  # index.sqlite3 readers: a rebuild that takes longer is a miss
STALE_INDEX_TEMP_AGE_S = 600.0  # an index temp file this old was left by a crash, not a build
PROJECT_LOCK_TIMEOUT_S = 5.0  # longer contention for a project lock is a transient failure
RETRY_AFTER_MAX_S = 3600.0  # a provider's Retry-After cannot park a job for longer than this
RELEASE_GRACE_S = 10.0  # at shutdown, how long a worker may spend handing its lease back
RESTART_FIRST_DELAY_S = 1.0  # a crashed background task is started again after this long...
RESTART_MAX_DELAY_S = 60.0  # ...doubling per crash in a row, up to this
RESTART_STABLE_AFTER_S = 300.0  # a task that ran this long before crashing starts over at 1 s
HEALTH_REPORT_INTERVAL_S = 30.0  # how often `systemctl --user status orcad` gets fresh numbers
DOCTOR_PROVIDER_TIMEOUT_S = 3.0  # doctor's probe of the extraction endpoint
DOCTOR_STUCK_AFTER_MIN_S = 3600.0  # an active job untouched this long is not merely queued
DOCTOR_DAEMON_TIMEOUT_S = 10.0  # doctor's calls to a running daemon
EXPLICIT_LOCK_TIMEOUT_S = 10.0  # user.md / memory.md locked by another process this long fails
SOCKET_PROBE_TIMEOUT_S = 1.0  # is another daemon answering on the socket path?
# does the daemon orcad.pid names answer as that pid, though its lock was free? (a start waits
# this long only when that pid is alive)
HOLDER_PING_TIMEOUT_S = 1.0
# a daemon that stopped serving holds its lock while it drains and closes (SHUTDOWN_GRACE_S and
# its stores); a new one waits this long for it
STOPPING_HOLDER_WAIT_S = 10.0
# how often a running daemon looks for its lock file and orcad.pid, deleted with the memory root
INSTANCE_LOCK_CHECK_S = 1.0
NOTIFY_SEND_TIMEOUT_S = 1.0  # the service manager reads promptly; never stall the daemon on it
ACCEPT_RETRY_S = 0.1  # after the process ran out of descriptors, as trio.serve_listeners does
SNAPSHOT_WRITE_DELAY_S = 0.5  # recall snapshots taken within this are written in one batch
DELIBERATE_PURGE_DELAY_S = 0.5  # forgets within this share one purge of the database
# the C heap's free pages are given back to the system this often (glibc's malloc_trim, about
# 0.3 ms on a daemon's heap): what publishing and recall over many projects free in the middle
# of a heap stays resident otherwise, after the traffic that freed it has stopped
HEAP_RELEASE_INTERVAL_S = 30.0
