// Package cluster makes runtimes that share one PostgreSQL store a
// cluster (docs/CLUSTER.md). Membership and placement are
// protoactor-go's cluster: members find each other through a cluster
// provider (automanaged: every member polls the others' health
// endpoints), and each session is placed by rendezvous hashing of its
// id over the members (of the grain kind "session", as disthash would
// place its grain). A session's branch actors run on the member that
// owns it; a member that gets a request for another member's session
// forwards it there (Member.Forward, through server.Options.Forward), at
// the URL that member gives, so any member answers any request.
//
// The member's actor system is its own, beside the runtime's: the
// runtime's actors never leave their process; only placement does.
package cluster

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httputil"
	"net/url"
	"sync"
	"sync/atomic"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	pcluster "github.com/asynkron/protoactor-go/cluster"
	"github.com/asynkron/protoactor-go/cluster/clusterproviders/automanaged"
	"github.com/asynkron/protoactor-go/cluster/identitylookup/disthash"
	"github.com/asynkron/protoactor-go/remote"
	"github.com/labstack/echo"
	"github.com/rs/zerolog"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"
	"google.golang.org/protobuf/types/known/wrapperspb"

	"github.com/contextinfinity/ctxinf/actors"
	"github.com/contextinfinity/ctxinf/internal/server"
	"github.com/contextinfinity/ctxinf/messages"
)

// SessionKind is the grain kind of a session: the members of this kind
// are those that place sessions.
const SessionKind = "session"

// Config is a member's configuration (the cluster.* keys).
type Config struct {
	// Name is the cluster's name; members of other clusters are ignored.
	Name string
	// Host and Port are where this member's actor system listens
	// (protoactor's remote, gRPC); the other members reach it there, so
	// Host is an address they can dial.
	Host string
	Port int
	// ManagePort is the port of the automanaged provider's health
	// endpoint (membership): it listens on Host, and answers only the
	// addresses of Peers' hosts (and loopback).
	ManagePort int
	// Peers are the host:manage_port of every member, this one included.
	Peers []string
	// AdvertiseURL is the base URL of this member's HTTP API, where the
	// others forward requests for the sessions it owns.
	AdvertiseURL string
	// Refresh is how often a member polls the others (default 1s): a
	// member that stops answering is out of the cluster within about
	// Refresh plus the poll's 2 s timeout.
	Refresh time.Duration
	// RequestTimeout bounds the request that asks an owner its URL
	// (default 2s): a request for a session whose owner died is answered
	// 503 after it, until the topology drops that member.
	RequestTimeout time.Duration
	// TLS, if set, is mutual TLS between the members' actor systems
	// (gRPC): each presents its certificate and accepts only peers whose
	// certificates TLS's RootCAs/ClientCAs verify (LoadTLS). Without it
	// the actor-system port takes any connection: bind it to a private
	// network.
	TLS *MemberTLS
	Log zerolog.Logger
}

func (c Config) validate() error {
	var errs []error
	if c.Name == "" {
		errs = append(errs, errors.New("cluster.name is empty"))
	}
	if c.Host == "" {
		errs = append(errs, errors.New("cluster.host is empty"))
	}
	if c.Port <= 0 || c.Port > 65535 {
		errs = append(errs, fmt.Errorf("cluster.port %d: want 1 to 65535", c.Port))
	}
	if c.ManagePort <= 0 || c.ManagePort > 65535 {
		errs = append(errs, fmt.Errorf("cluster.manage_port %d: want 1 to 65535", c.ManagePort))
	}
	if len(c.Peers) == 0 {
		errs = append(errs, errors.New("cluster.peers is empty: list every member's host:manage_port, this one's included"))
	}
	for _, p := range c.Peers {
		if _, _, err := net.SplitHostPort(p); err != nil {
			errs = append(errs, fmt.Errorf("cluster.peers %q: want host:port: %v", p, err))
		}
	}
	if u, err := url.Parse(c.AdvertiseURL); err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		errs = append(errs, fmt.Errorf("cluster.advertise_url %q: want http://host:port, the URL other members reach this one's HTTP API at", c.AdvertiseURL))
	}
	return errors.Join(errs...)
}

// Member is this process's membership of the cluster. It implements
// actors.Placement.
type Member struct {
	cfg  Config
	inc  atomic.Pointer[incarnation] // the current one (rejoin replaces it)
	self string                      // this member's address (host:port)

	rdv     atomic.Pointer[pcluster.Rendezvous]
	members atomic.Int64                        // members in the last topology
	addrs   atomic.Pointer[map[string]struct{}] // their addresses
	joined  chan struct{}
	once    sync.Once

	rt        atomic.Pointer[actors.Runtime]
	rebalance chan struct{} // a topology change to act on (coalesced)
	done      chan struct{}
	wg        sync.WaitGroup

	urls     sync.Map // member address to its AdvertiseURL
	client   *http.Client
	forwards atomic.Int64 // requests forwarded
	unreach  atomic.Int64 // forwards that found no owner
	moves    atomic.Int64 // branch actors stopped because their session moved
	rejoins  atomic.Int64 // new incarnations after a peer blocked this member's id
}

// Join starts this member and joins the cluster. It returns at once;
// Joined is closed once the member sees itself in the cluster's
// topology (WaitJoined).
func Join(cfg Config) (*Member, error) {
	if cfg.Refresh <= 0 {
		cfg.Refresh = time.Second
	}
	if cfg.RequestTimeout <= 0 {
		cfg.RequestTimeout = 2 * time.Second
	}
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	m := &Member{cfg: cfg, joined: make(chan struct{}), rebalance: make(chan struct{}, 1), done: make(chan struct{}),
		client: &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 64, IdleConnTimeout: time.Minute}}}
	m.rdv.Store(pcluster.NewRendezvous())
	inc, err := m.start()
	if err != nil {
		return nil, err
	}
	m.self = inc.sys.Address()
	m.wg.Add(2)
	go m.rebalancer()
	go m.watchBlocked()
	return m, nil
}

// incarnation is one actor system of this member in the cluster, under
// its own member id: rejoin replaces it by a new one on the same ports.
type incarnation struct {
	sys     *actor.ActorSystem
	c       *pcluster.Cluster
	started atomic.Bool // StartMember succeeded: Shutdown stops it
}

// start starts a new incarnation of this member and makes it the
// current one.
func (m *Member) start() (*incarnation, error) {
	cfg := m.cfg
	inc := &incarnation{sys: actor.NewActorSystem(actor.WithLoggerFactory(func(*actor.ActorSystem) *slog.Logger {
		return slog.New(slog.NewTextHandler(io.Discard, nil))
	}))}
	inc.sys.EventStream.Subscribe(func(ev any) {
		if t, ok := ev.(*pcluster.ClusterTopology); ok && m.inc.Load() == inc {
			m.onTopology(inc, t)
		}
	})
	grain := actor.PropsFromProducer(func() actor.Actor { return &urlActor{url: cfg.AdvertiseURL} })
	manage, err := listenMembership(cfg)
	if err != nil {
		return nil, err
	}
	provider := automanaged.NewWithTesting(cfg.Refresh, cfg.ManagePort, manage, cfg.Peers...)
	var ropts []remote.ConfigOption
	if cfg.TLS != nil {
		ropts = append(ropts, remote.WithServerOptions(grpc.Creds(credentials.NewTLS(cfg.TLS.Server))),
			remote.WithDialOptions(grpc.WithTransportCredentials(credentials.NewTLS(cfg.TLS.Client))))
	}
	ccfg := pcluster.Configure(cfg.Name, provider, disthash.New(), remote.Configure(cfg.Host, cfg.Port, ropts...),
		pcluster.WithKinds(pcluster.NewKind(SessionKind, grain)), pcluster.WithRequestTimeout(cfg.RequestTimeout))
	inc.c = pcluster.New(inc.sys, ccfg)
	// The provider leaves a listener it was given without its route. The
	// node it describes also lists the member ids this member has blocked
	// (watchBlocked).
	manage.GET("/_health", func(c echo.Context) error {
		return c.JSON(http.StatusOK, healthNode{
			NodeModel: automanaged.NewNode(cfg.Name, inc.sys.ID, cfg.Host, cfg.Port, cfg.ManagePort, inc.c.GetClusterKinds()),
			Blocked:   inc.blocked(),
		})
	})
	if _, err := inc.sys.Root.SpawnNamed(grain, urlActorName); err != nil {
		manage.Listener.Close()
		return nil, fmt.Errorf("cluster: join %s: %w", cfg.Name, err)
	}
	m.inc.Store(inc) // its topology events are this member's
	if err := startMember(inc.c); err != nil {
		manage.Listener.Close()
		return nil, fmt.Errorf("cluster: join %s: %w", cfg.Name, err)
	}
	inc.started.Store(true)
	return inc, nil
}

// startMember runs protoactor's StartMember, which panics on failure
// (a port in use, say).
func startMember(c *pcluster.Cluster) (err error) {
	defer func() {
		if p := recover(); p != nil {
			err = fmt.Errorf("%v", p)
		}
	}()
	c.StartMember()
	return nil
}

// Address is this member's address in the cluster.
func (m *Member) Address() string { return m.self }

// Joined is closed once this member is in the cluster's topology.
func (m *Member) Joined() <-chan struct{} { return m.joined }

// WaitJoined waits until this member is in the cluster's topology.
func (m *Member) WaitJoined(ctx context.Context) error {
	select {
	case <-m.joined:
		return nil
	case <-ctx.Done():
		return fmt.Errorf("cluster: this member (%s) is not in the cluster's topology yet: are cluster.peers reachable? %w",
			m.self, ctx.Err())
	}
}

// Members returns how many members the last topology had.
func (m *Member) Members() int { return int(m.members.Load()) }

// Owner implements actors.Placement: the member that owns session by
// rendezvous hashing over the current members.
func (m *Member) Owner(session messages.SessionID) (owner string, local, ok bool) {
	owner = m.rdv.Load().GetByClusterIdentity(&pcluster.ClusterIdentity{Kind: SessionKind, Identity: session.String()})
	if owner == "" {
		return "", false, false
	}
	return owner, owner == m.self, true
}

func (m *Member) onTopology(inc *incarnation, t *pcluster.ClusterTopology) {
	rdv := pcluster.NewRendezvous()
	rdv.UpdateMembers(t.Members)
	m.rdv.Store(rdv)
	m.members.Store(int64(len(t.Members)))
	self := inc.sys.Address()
	addrs := make([]string, 0, len(t.Members))
	in := make(map[string]struct{}, len(t.Members))
	for _, mem := range t.Members {
		addrs = append(addrs, mem.Address())
		in[mem.Address()] = struct{}{}
		if mem.Address() == self {
			m.once.Do(func() { close(m.joined) })
		}
	}
	m.addrs.Store(&in)
	for _, mem := range t.Left {
		m.urls.Delete(mem.Address())
	}
	m.cfg.Log.Info().Strs("members", addrs).Int("joined", len(t.Joined)).Int("left", len(t.Left)).Msg("cluster: topology")
	select {
	case m.rebalance <- struct{}{}:
	default:
	}
}

// Attach hands topology changes to rt: each change stops rt's branch
// actors of sessions it no longer owns and wakes the work pending on
// the sessions it gained (actors.Runtime.Rebalance).
func (m *Member) Attach(rt *actors.Runtime) {
	m.rt.Store(rt)
	select {
	case m.rebalance <- struct{}{}:
	default:
	}
}

func (m *Member) rebalancer() {
	defer m.wg.Done()
	for {
		select {
		case <-m.done:
			return
		case <-m.rebalance:
		}
		rt := m.rt.Load()
		if rt == nil {
			continue
		}
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		stopped, woken, err := rt.Rebalance(ctx)
		cancel()
		m.moves.Add(int64(stopped))
		l := m.cfg.Log.Debug()
		if err != nil {
			l = m.cfg.Log.Warn().Err(err)
		}
		l.Int("stopped", stopped).Int("woken", woken).Msg("cluster: rebalanced")
	}
}

// Forward implements server.Options.Forward: it finds the URL of
// to.Owner, the member that owns to.Session (asking that member
// itself), and proxies the request there, streaming the answer back. A
// URL that fails (the member is gone, or answers that it does not own
// the session) is dropped, so that the next request asks again.
func (m *Member) Forward(w http.ResponseWriter, r *http.Request, body io.Reader, to *actors.NotOwnerError) bool {
	base, err := m.ownerURL(to.Owner)
	if err != nil {
		m.unreach.Add(1)
		m.cfg.Log.Warn().Err(err).Str("session", to.Session.String()).Str("owner", to.Owner).Msg("cluster: forward")
		return false
	}
	target, err := url.Parse(base)
	if err != nil {
		m.unreach.Add(1)
		m.urls.CompareAndDelete(to.Owner, base)
		return false
	}
	failed := false
	rp := &httputil.ReverseProxy{
		Rewrite: func(pr *httputil.ProxyRequest) {
			pr.SetURL(target)
			pr.Out.Host = target.Host
			pr.Out.Header.Set(server.ForwardedHeader, m.self)
			pr.Out.Body = io.NopCloser(body)
		},
		Transport:     m.client.Transport,
		FlushInterval: -1, // server-sent events go through as they come
		ModifyResponse: func(resp *http.Response) error {
			if resp.StatusCode == http.StatusServiceUnavailable && resp.Header.Values(server.OwnerHeader) != nil {
				// Not the owner behind this URL: the client gets its 503
				// (and retries); the next request asks the owner again.
				m.urls.CompareAndDelete(to.Owner, base)
				m.cfg.Log.Warn().Str("session", to.Session.String()).Str("owner", to.Owner).Str("url", base).
					Str("answered_owner", resp.Header.Get(server.OwnerHeader)).Msg("cluster: forwarded to a member that does not own the session")
			}
			return nil
		},
		ErrorHandler: func(http.ResponseWriter, *http.Request, error) {
			failed = true // nothing written: the caller answers 503
			m.urls.CompareAndDelete(to.Owner, base)
		},
	}
	rp.ServeHTTP(w, r)
	if failed {
		m.unreach.Add(1)
		return false
	}
	m.forwards.Add(1)
	return true
}

// ownerURL returns the HTTP API URL of the member at address owner. It
// asks that member's urlActor, never the session's placement: an
// activation or a cache of it may still be on a member that owned the
// session before, whose URL would be remembered for owner until the
// topology changed again.
func (m *Member) ownerURL(owner string) (string, error) {
	if v, ok := m.urls.Load(owner); ok {
		return v.(string), nil
	}
	if in := m.addrs.Load(); in == nil {
		return "", fmt.Errorf("member %s: this member has no topology yet", owner)
	} else if _, ok := (*in)[owner]; !ok {
		// Gone since the placement named it (or never there): asking it
		// would only wait.
		return "", fmt.Errorf("member %s is not in the cluster's topology", owner)
	}
	pid := actor.NewPID(owner, urlActorName)
	res, err := m.inc.Load().sys.Root.RequestFuture(pid, &wrapperspb.StringValue{}, m.cfg.RequestTimeout).Result()
	if err != nil {
		return "", fmt.Errorf("ask member %s its URL: %w", owner, err)
	}
	v, ok := res.(*wrapperspb.StringValue)
	if !ok || v.GetValue() == "" {
		return "", fmt.Errorf("member %s answered %T for its URL", owner, res)
	}
	m.urls.Store(owner, v.GetValue())
	return v.GetValue(), nil
}

// Stats returns the member's counters, for /metrics.
func (m *Member) Stats() server.ClusterStats {
	return server.ClusterStats{Members: m.Members(), Forwarded: m.forwards.Load(), Unreached: m.unreach.Load(), Moved: m.moves.Load(),
		Rejoined: m.rejoins.Load()}
}

// Leave leaves the cluster: the others stop forwarding here within a
// poll, and the sessions this member owned move.
func (m *Member) Leave() {
	select {
	case <-m.done:
		return
	default:
	}
	close(m.done)
	m.wg.Wait()
	if inc := m.inc.Load(); inc.started.Load() {
		inc.c.Shutdown(true)
	}
}

// urlActorName is the name of each member's urlActor.
const urlActorName = "ctxinf-url"

// urlActor answers its member's HTTP URL (cluster.advertise_url) to a
// member that forwards requests there. It is also the session kind's
// grain, which is never activated: the kind marks the members that
// place sessions (rendezvous hashing over the members of the kind).
type urlActor struct{ url string }

func (a *urlActor) Receive(ctx actor.Context) {
	switch ctx.Message().(type) {
	case *wrapperspb.StringValue:
		ctx.Respond(&wrapperspb.StringValue{Value: a.url})
	}
}
