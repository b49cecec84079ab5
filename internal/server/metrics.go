package server

import (
	"net/http"
	"strconv"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/contextinfinity/ctxinf/actors"
	"github.com/contextinfinity/ctxinf/internal/core"
	"github.com/contextinfinity/ctxinf/messages"
	"github.com/contextinfinity/ctxinf/persistence"
)

// Metrics are the runtime's and the API's Prometheus metrics (SRD §15):
// per turn and per step latency, tokens, retrieval, summarization,
// indexing backlog, journal bytes displayed and durable, actor restarts,
// and HTTP requests. Hook fills an actors.Config with its observers;
// the server serves them at /metrics.
type Metrics struct {
	reg *prometheus.Registry

	turns          *prometheus.CounterVec
	turnSeconds    prometheus.Histogram
	assembly       prometheus.Histogram
	contextTokens  prometheus.Histogram
	stepSeconds    *prometheus.HistogramVec
	stepTokens     *prometheus.CounterVec
	retrievalSecs  prometheus.Histogram
	retrievalHits  prometheus.Histogram
	retrievalFails prometheus.Counter
	summaries      *prometheus.CounterVec
	indexedChunks  prometheus.Counter
	journalBytes   *prometheus.CounterVec
	httpRequests   *prometheus.CounterVec
	httpSeconds    *prometheus.HistogramVec
	retentionDels  prometheus.Counter

	mu      sync.Mutex
	started map[messages.TurnID]time.Time // accepted turns, until they end
}

var latencyBuckets = []float64{.0005, .001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10, 30, 60, 120}

// NewMetrics returns the metrics, registered with Go's and the process's
// collectors.
func NewMetrics() *Metrics {
	m := &Metrics{reg: prometheus.NewRegistry(), started: map[messages.TurnID]time.Time{}}
	m.turns = prometheus.NewCounterVec(prometheus.CounterOpts{Name: "ctxinf_turns_total",
		Help: "Turns by how they ended: accepted, finalized (by outcome), failed, recorded (imported)."}, []string{"event"})
	m.turnSeconds = prometheus.NewHistogram(prometheus.HistogramOpts{Name: "ctxinf_turn_seconds",
		Help: "Time from a turn's acceptance to its final response.", Buckets: latencyBuckets})
	m.assembly = prometheus.NewHistogram(prometheus.HistogramOpts{Name: "ctxinf_context_assembly_seconds",
		Help: "Time to assemble a turn's context, retrieval included.", Buckets: latencyBuckets})
	m.contextTokens = prometheus.NewHistogram(prometheus.HistogramOpts{Name: "ctxinf_context_tokens",
		Help: "Estimated tokens of each assembled context.", Buckets: prometheus.ExponentialBuckets(256, 2, 12)})
	m.stepSeconds = prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: "ctxinf_step_seconds",
		Help: "Provider step duration, by provider and outcome.", Buckets: latencyBuckets}, []string{"provider", "outcome"})
	m.stepTokens = prometheus.NewCounterVec(prometheus.CounterOpts{Name: "ctxinf_step_tokens_total",
		Help: "Tokens the providers reported, by provider and direction: input, output, and cache_read and cache_write, the input tokens read from and written to the provider's prompt cache."},
		[]string{"provider", "direction"})
	m.retrievalSecs = prometheus.NewHistogram(prometheus.HistogramOpts{Name: "ctxinf_retrieval_seconds",
		Help: "Time of each context's hybrid search.", Buckets: latencyBuckets})
	m.retrievalHits = prometheus.NewHistogram(prometheus.HistogramOpts{Name: "ctxinf_retrieval_hits",
		Help: "Chunks each context's search offered.", Buckets: prometheus.LinearBuckets(0, 2, 10)})
	m.retrievalFails = prometheus.NewCounter(prometheus.CounterOpts{Name: "ctxinf_retrieval_failures_total",
		Help: "Searches that failed (the turn went on without retrieval)."})
	m.summaries = prometheus.NewCounterVec(prometheus.CounterOpts{Name: "ctxinf_summaries_total",
		Help: "Summaries written, by result: committed, stale (the branch moved on), failed."}, []string{"result"})
	m.indexedChunks = prometheus.NewCounter(prometheus.CounterOpts{Name: "ctxinf_indexed_chunks_total",
		Help: "Chunks of indexed turns."})
	m.journalBytes = prometheus.NewCounterVec(prometheus.CounterOpts{Name: "ctxinf_journal_bytes_total",
		Help: "Stream journal bytes of finalized turns: displayed to the client, and durable (fsynced)."}, []string{"kind"})
	m.httpRequests = prometheus.NewCounterVec(prometheus.CounterOpts{Name: "ctxinf_http_requests_total",
		Help: "HTTP requests by route and status (\"aborted\": the server cut the connection partway, as an export does when a read fails after its first line)."}, []string{"route", "code"})
	m.httpSeconds = prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: "ctxinf_http_request_seconds",
		Help: "HTTP request duration by route (a streamed turn counts until its end).", Buckets: latencyBuckets}, []string{"route"})
	m.retentionDels = prometheus.NewCounter(prometheus.CounterOpts{Name: "ctxinf_retention_deleted_sessions_total",
		Help: "Sessions the retention job deleted, idle past their retention."})
	m.reg.MustRegister(m.retentionDels)
	m.reg.MustRegister(m.turns, m.turnSeconds, m.assembly, m.contextTokens, m.stepSeconds, m.stepTokens, m.retrievalSecs,
		m.retrievalHits, m.retrievalFails, m.summaries, m.indexedChunks, m.journalBytes, m.httpRequests,
		m.httpSeconds, collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	return m
}

// Hook sets cfg's observers to feed m (chaining any already set).
func (m *Metrics) Hook(cfg *actors.Config) {
	prevObserve := cfg.Observe
	cfg.Observe = func(b messages.BranchID, ev messages.BranchEvent) {
		m.event(ev)
		if prevObserve != nil {
			prevObserve(b, ev)
		}
	}
	prevAsm := cfg.ObserveAssembly
	cfg.ObserveAssembly = func(b messages.BranchID, took time.Duration, rep core.AssemblyReport) {
		m.assembly.Observe(took.Seconds())
		m.contextTokens.Observe(float64(rep.Total))
		if prevAsm != nil {
			prevAsm(b, took, rep)
		}
	}
	cfg.ObserveStep = func(_ messages.BranchID, row persistence.StepRow) {
		m.stepSeconds.WithLabelValues(row.Provider, row.Outcome.Kind.String()).Observe(row.Ended.Sub(row.Started).Seconds())
		m.stepTokens.WithLabelValues(row.Provider, "input").Add(float64(row.InputTokens))
		m.stepTokens.WithLabelValues(row.Provider, "output").Add(float64(row.OutputTokens))
		m.stepTokens.WithLabelValues(row.Provider, "cache_read").Add(float64(row.CacheReadTokens))
		m.stepTokens.WithLabelValues(row.Provider, "cache_write").Add(float64(row.CacheWriteTokens))
	}
	cfg.ObserveRetrieval = func(_ messages.BranchID, hits int, took time.Duration, err error) {
		m.retrievalSecs.Observe(took.Seconds())
		if err != nil {
			m.retrievalFails.Inc()
			return
		}
		m.retrievalHits.Observe(float64(hits))
	}
	prevDeleted := cfg.Retention.Deleted
	cfg.Retention.Deleted = func(ids []messages.SessionID) {
		m.retentionDels.Add(float64(len(ids)))
		if prevDeleted != nil {
			prevDeleted(ids)
		}
	}
	cfg.ObserveSummary = func(_ messages.BranchID, committed bool, err error) {
		switch {
		case err != nil:
			m.summaries.WithLabelValues("failed").Inc()
		case committed:
			m.summaries.WithLabelValues("committed").Inc()
		default:
			m.summaries.WithLabelValues("stale").Inc()
		}
	}
}

// Runtime adds the metrics only the open runtime knows: actor restarts,
// and how long the store's durable group commits took.
func (m *Metrics) Runtime(rt *actors.Runtime) {
	m.reg.MustRegister(prometheus.NewCounterFunc(prometheus.CounterOpts{Name: "ctxinf_actor_restarts_total",
		Help: "Actor restarts by supervision."}, func() float64 { return float64(rt.Restarts()) }),
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "ctxinf_index_backlog_turns",
			Help: "Turns the branches in memory folded into a state and have not indexed yet (an import indexes what it folds before it answers)."},
			func() float64 { return float64(rt.IndexBacklog()) }),
		prometheus.NewCounterFunc(prometheus.CounterOpts{Name: "ctxinf_store_head_rejects_total",
			Help: "Writes the store refused because their branch had moved on (its head was not the one expected, or a " +
				"position written was taken): in a cluster, the commits of a stale activation."}, func() float64 { return float64(rt.DB().Stats().HeadRejects) }),
		prometheus.NewCounterFunc(prometheus.CounterOpts{Name: "ctxinf_store_retries_total",
			Help: "Store transactions tried again after a serialization failure, a lost head compare-and-swap or a lost " +
				"connection (PostgreSQL)."}, func() float64 { return float64(rt.DB().Stats().Retries) }),
		syncCollector{stats: rt.DB().Stats})
}

// ClusterStats are a cluster member's counters (cluster.Member.Stats).
type ClusterStats struct {
	Members   int   // in the last topology
	Forwarded int64 // requests forwarded to the member that owns their session
	Unreached int64 // forwards that reached no owner (answered 503)
	Moved     int64 // branch actors stopped because their session moved to another member
	Rejoined  int64 // times this member rejoined under a new id after a peer blocked it
}

// Cluster adds a cluster member's metrics.
func (m *Metrics) Cluster(stats func() ClusterStats) {
	m.reg.MustRegister(
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "ctxinf_cluster_members",
			Help: "Members in this member's view of the cluster."}, func() float64 { return float64(stats().Members) }),
		prometheus.NewCounterFunc(prometheus.CounterOpts{Name: "ctxinf_cluster_forwarded_total",
			Help: "Requests forwarded to the member that owns their session."}, func() float64 { return float64(stats().Forwarded) }),
		prometheus.NewCounterFunc(prometheus.CounterOpts{Name: "ctxinf_cluster_unreached_total",
			Help: "Requests whose session's owner could not be reached (answered 503)."}, func() float64 { return float64(stats().Unreached) }),
		prometheus.NewCounterFunc(prometheus.CounterOpts{Name: "ctxinf_cluster_moved_branches_total",
			Help: "Branch actors stopped here because their session moved to another member."}, func() float64 { return float64(stats().Moved) }),
		prometheus.NewCounterFunc(prometheus.CounterOpts{Name: "ctxinf_cluster_rejoins_total",
			Help: "Times this member rejoined the cluster under a new id because a peer had left it out for good."},
			func() float64 { return float64(stats().Rejoined) }))
}

// syncCollector serves the store's Stats.SyncTimes as a histogram.
type syncCollector struct{ stats func() persistence.Stats }

var syncDesc = prometheus.NewDesc("ctxinf_store_sync_seconds",
	"Time of each durable group commit of the store (write and sync), which every write in the group waits for.", nil, nil)

func (syncCollector) Describe(ch chan<- *prometheus.Desc) { ch <- syncDesc }

func (c syncCollector) Collect(ch chan<- prometheus.Metric) {
	st := c.stats()
	buckets := make(map[float64]uint64, len(persistence.SyncTimeBounds))
	var n uint64
	for i, b := range persistence.SyncTimeBounds {
		n += st.SyncTimes[i]
		buckets[b.Seconds()] = n
	}
	n += st.SyncTimes[len(persistence.SyncTimeBounds)]
	ch <- prometheus.MustNewConstHistogram(syncDesc, n, st.SyncTime.Seconds(), buckets)
}

func (m *Metrics) event(ev messages.BranchEvent) {
	switch e := ev.(type) {
	case messages.TurnAccepted:
		m.turns.WithLabelValues("accepted").Inc()
		m.mu.Lock()
		m.started[e.Turn] = time.Now()
		m.mu.Unlock()
	case messages.ResponseFinalized:
		m.turns.WithLabelValues("finalized_" + e.Outcome.Kind.String()).Inc()
		m.journalBytes.WithLabelValues("displayed").Add(float64(e.Displayed))
		m.journalBytes.WithLabelValues("durable").Add(float64(e.Durable))
		m.end(e.Turn, true)
	case messages.TurnFailed:
		m.turns.WithLabelValues("failed").Inc()
		m.end(e.Turn, false)
	case messages.TurnRecorded:
		m.turns.WithLabelValues("recorded").Inc()
	case messages.TurnIndexed:
		m.indexedChunks.Add(float64(e.Chunks))
	}
}

func (m *Metrics) end(turn messages.TurnID, observe bool) {
	m.mu.Lock()
	t0, ok := m.started[turn]
	delete(m.started, turn)
	m.mu.Unlock()
	if ok && observe {
		m.turnSeconds.Observe(time.Since(t0).Seconds())
	}
}

// handler serves the metrics.
func (m *Metrics) handler() http.Handler {
	return promhttp.HandlerFor(m.reg, promhttp.HandlerOpts{})
}

// statusWriter records the status a handler wrote.
type statusWriter struct {
	http.ResponseWriter
	code  int
	wrote bool // a status or body was written
}

func (w *statusWriter) WriteHeader(code int) {
	if w.code == 0 {
		w.code = code
	}
	w.wrote = true
	w.ResponseWriter.WriteHeader(code)
}

func (w *statusWriter) Write(b []byte) (int, error) {
	w.wrote = true
	return w.ResponseWriter.Write(b)
}

func (w *statusWriter) Flush() {
	if f, ok := w.ResponseWriter.(http.Flusher); ok {
		f.Flush()
	}
}

// codeAborted is the code observed for a request whose handler cut its
// connection: the status it had written is not what the client got.
const codeAborted = -1

// observe counts a request on route with the status it got.
func (m *Metrics) observe(route string, code int, took time.Duration) {
	label := strconv.Itoa(code)
	switch code {
	case 0:
		label = strconv.Itoa(http.StatusOK)
	case codeAborted:
		label = "aborted"
	}
	m.httpRequests.WithLabelValues(route, label).Inc()
	m.httpSeconds.WithLabelValues(route).Observe(took.Seconds())
}
