package service

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"net"
	"os"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	"github.com/asynkron/protoactor-go/remote"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/experimental"
	"google.golang.org/grpc/keepalive"
	"google.golang.org/grpc/status"

	"github.com/actorfeed/actorfeed/actors"
)

// Errors of Listen.
var (
	// ErrInsecure is wrapped when a node would listen beyond loopback
	// without mutual TLS: the remote lets any peer send any actor Stop.
	ErrInsecure = errors.New("service: listening beyond loopback needs mutual TLS (--tls-cert, --tls-key, --tls-ca)")
	// ErrConfig is wrapped when a Config cannot be used.
	ErrConfig = errors.New("service: invalid node configuration")
)

// TLS names the PEM files of mutual TLS: the node's certificate and key
// (valid for both server and client use: every node dials the peers it
// answers) and the CA that signs every peer's.
type TLS struct {
	Cert, Key, CA string
}

func (t TLS) enabled() bool { return t.Cert != "" || t.Key != "" || t.CA != "" }

// Config configures a Node.
type Config struct {
	// Listen is host:port; default DefaultListen. Port 0 picks a free one.
	Listen string
	// Advertise is the host:port peers reach the node at, when it is not
	// the listening address (behind NAT, or listening on 0.0.0.0).
	Advertise string
	TLS       TLS
	// MaxMessage bounds one message; default actors.DefaultMaxMessage.
	MaxMessage int
	// Keepalive is how often an idle connection is pinged; a peer that
	// does not answer within Keepalive is cut. Default DefaultKeepalive.
	// gRPC pings from a connection's dialing side no more often than every
	// 10 s whatever is set; the protocol's own lease (Service.Lease) is
	// what finds a silent worker sooner.
	Keepalive time.Duration
}

// Defaults of Config.
const (
	DefaultListen    = "127.0.0.1:0"
	DefaultKeepalive = 10 * time.Second
	// WriterBatch is how many messages the remote packs into one gRPC frame:
	// the receive limit is MaxMessage times it.
	WriterBatch = 16
	// MaxMaxMessage bounds Config.MaxMessage: the receive limit stays
	// within gRPC's int32 sizes.
	MaxMaxMessage = 1 << 26
	// FlowWindow is the HTTP/2 flow-control window of a connection and of
	// its stream: bytes a sender may have in flight unacknowledged. gRPC's
	// 64 KiB start (grown by its bandwidth estimate) holds a batch of
	// megabytes to a fraction of the link's bandwidth (docs/performance.md).
	FlowWindow = 16 << 20
	// IdleTimeout puts a gRPC connection with no stream to sleep: the
	// pinned remote never closes a connection whose first stream failed
	// (a message to a peer that just died), which otherwise dialled its
	// address again, with backoff, for the life of the process. A live
	// connection always has the remote's stream open.
	IdleTimeout = 2 * time.Second
	// StopGrace is how long Close lets peers end their streams before it
	// stops the node's server at once.
	StopGrace = time.Second
	// HandshakeTimeout bounds a new connection's handshake (mutual TLS and
	// HTTP/2's preface), for which gRPC's server waits 120 s: a stop of the
	// server waits for every handshake under way, so a peer that opened a
	// connection and said nothing (a worker frozen mid-dial, a link stalled
	// before its first bytes) held a node's Close for two minutes (sim
	// --network's stops of 2m2s). A handshake over a network takes a few
	// round trips.
	HandshakeTimeout = 5 * time.Second
	// RemoteSettle bounds how long the remote's goroutines outlive a
	// node's Close: its own stop may go on for remoteStopTimeout, its
	// server's for HandshakeTimeout (see shutdown), a writer whose peer
	// does not answer sleeps 2 s after its failed try, and a failed gRPC
	// connection turns idle (its goroutines then among RemoteLeaks)
	// IdleTimeout after its last use. Leak checks wait this long before
	// they fail.
	RemoteSettle = remoteStopTimeout + 2*time.Second + IdleTimeout + time.Second
	// connectTries is how many times the remote's writer tries to reach a
	// peer, 2 s apart, before it gives the peer up (EndpointTerminated).
	// Its default of 5 kept a writer at a gone peer for 10 s (a worker
	// heartbeating a client that had stopped), and sim --network's client
	// kept hundreds of such connections' goroutines (264-384 in 150
	// scenarios; none with one try); the protocol probes and rejoins lost
	// workers on its own.
	connectTries = 1
	// remoteStopTimeout is the pinned remote's wait for an actor to stop
	// (RootContext.StopFuture's fixed timeout).
	remoteStopTimeout = 10 * time.Second
	// queueStart is the first size of the remote's growing queues.
	queueStart = 1024
)

// RemoteLeaks are the top functions of the goroutines the pinned remote
// leaves behind with the gRPC connections it never closes (see
// IdleTimeout): an idle connection's callback serializers, and the watcher
// of a stream it opened on one with a context never cancelled. Leak checks
// ignore these, and only these.
var RemoteLeaks = []string{
	"google.golang.org/grpc/internal/grpcsync.(*CallbackSerializer).run",
	"google.golang.org/grpc.newClientStreamWithParams.func4",
}

// Node is an actor system reachable over Proto.Actor remote.
type Node struct {
	sys    *actor.ActorSystem
	remote *remote.Remote
	worker *Worker
	once   sync.Once
	err    error
}

// Listen starts a node.
func Listen(cfg Config) (*Node, error) {
	if cfg.Listen == "" {
		cfg.Listen = DefaultListen
	}
	if cfg.MaxMessage == 0 {
		cfg.MaxMessage = actors.DefaultMaxMessage
	}
	if cfg.Keepalive == 0 {
		cfg.Keepalive = DefaultKeepalive
	}
	if cfg.MaxMessage < 0 || cfg.MaxMessage > MaxMaxMessage {
		return nil, fmt.Errorf("%w: max message %d: want 1 to %d bytes", ErrConfig, cfg.MaxMessage, MaxMaxMessage)
	}
	host, port, err := splitHostPort(cfg.Listen)
	if err != nil {
		return nil, err
	}
	if !cfg.TLS.enabled() && !loopback(host) {
		return nil, fmt.Errorf("%w: %s", ErrInsecure, cfg.Listen)
	}
	server, dial, err := grpcOptions(cfg)
	if err != nil {
		return nil, err
	}
	// The remote's queues are rings that grow when full; their default
	// start of a million slots is pointers per peer that the collector
	// scans on every cycle (the cost: docs/performance.md).
	opts := []remote.ConfigOption{remote.WithServerOptions(server...), remote.WithDialOptions(dial...),
		remote.WithEndpointWriterBatchSize(WriterBatch), remote.WithEndpointWriterQueueSize(queueStart),
		remote.WithEndpointManagerQueueSize(queueStart)}
	if cfg.Advertise != "" {
		opts = append(opts, remote.WithAdvertisedHost(cfg.Advertise))
	}
	sys := actors.NewSystem()
	if strings.Contains(host, ":") {
		// The remote joins host and port with a colon: an IPv6 host
		// must come bracketed, or its listen address has too many colons.
		host = "[" + host + "]"
	}
	rc := remote.Configure(host, port, opts...)
	rc.MaxRetryCount = connectTries
	r := remote.NewRemote(sys, rc)
	if err := start(r); err != nil {
		sys.Shutdown()
		return nil, fmt.Errorf("service: listening on %s: %w", cfg.Listen, err)
	}
	return &Node{sys: sys, remote: r}, nil
}

// start starts the remote, which panics when it cannot listen.
func start(r *remote.Remote) (err error) {
	defer func() {
		if p := recover(); p != nil {
			err = fmt.Errorf("%v", p)
		}
	}()
	r.Start()
	return nil
}

func splitHostPort(addr string) (string, int, error) {
	host, p, err := net.SplitHostPort(addr)
	if err != nil {
		return "", 0, fmt.Errorf("%w: listen address %q: %w", ErrConfig, addr, err)
	}
	port, err := strconv.Atoi(p)
	if err != nil || port < 0 || port > 65535 {
		return "", 0, fmt.Errorf("%w: listen address %q: bad port", ErrConfig, addr)
	}
	return host, port, nil
}

// loopback says whether host names only this machine.
func loopback(host string) bool {
	if host == "localhost" {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

// grpcOptions are the node's server and dial options: size limits,
// keepalive, recovery, and mutual TLS or plaintext (on loopback).
func grpcOptions(cfg Config) ([]grpc.ServerOption, []grpc.DialOption, error) {
	limit := cfg.MaxMessage * WriterBatch
	pool := new(bufferPool)
	server := []grpc.ServerOption{
		experimental.BufferPool(pool),
		grpc.ForceServerCodecV2(codec{pool}),
		grpc.MaxRecvMsgSize(limit),
		grpc.ConnectionTimeout(HandshakeTimeout),
		grpc.InitialWindowSize(FlowWindow),
		grpc.InitialConnWindowSize(FlowWindow),
		grpc.KeepaliveParams(keepalive.ServerParameters{Time: cfg.Keepalive, Timeout: cfg.Keepalive}),
		grpc.KeepaliveEnforcementPolicy(keepalive.EnforcementPolicy{MinTime: cfg.Keepalive / 2, PermitWithoutStream: true}),
		grpc.ChainUnaryInterceptor(recoverUnary),
		grpc.ChainStreamInterceptor(recoverStream),
	}
	dial := []grpc.DialOption{
		experimental.WithBufferPool(pool),
		grpc.WithIdleTimeout(IdleTimeout),
		grpc.WithInitialWindowSize(FlowWindow),
		grpc.WithInitialConnWindowSize(FlowWindow),
		grpc.WithDefaultCallOptions(grpc.ForceCodecV2(codec{pool}), grpc.MaxCallRecvMsgSize(limit), grpc.MaxCallSendMsgSize(limit)),
		grpc.WithKeepaliveParams(keepalive.ClientParameters{Time: cfg.Keepalive, Timeout: cfg.Keepalive, PermitWithoutStream: true}),
	}
	if !cfg.TLS.enabled() {
		return server, append(dial, grpc.WithTransportCredentials(insecure.NewCredentials())), nil
	}
	serverTLS, clientTLS, err := mutualTLS(cfg.TLS)
	if err != nil {
		return nil, nil, err
	}
	return append(server, grpc.Creds(credentials.NewTLS(serverTLS))),
		append(dial, grpc.WithTransportCredentials(credentials.NewTLS(clientTLS))), nil
}

// mutualTLS loads the node's certificate and the peers' CA: the server
// asks every peer for a certificate the CA signed, and so does the dialer.
func mutualTLS(t TLS) (server, client *tls.Config, err error) {
	if t.Cert == "" || t.Key == "" || t.CA == "" {
		return nil, nil, fmt.Errorf("%w: mutual TLS needs a certificate, a key and a CA", ErrConfig)
	}
	cert, err := tls.LoadX509KeyPair(t.Cert, t.Key)
	if err != nil {
		return nil, nil, fmt.Errorf("%w: %w", ErrConfig, err)
	}
	pem, err := os.ReadFile(t.CA)
	if err != nil {
		return nil, nil, fmt.Errorf("%w: %w", ErrConfig, err)
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(pem) {
		return nil, nil, fmt.Errorf("%w: %s holds no PEM certificate", ErrConfig, t.CA)
	}
	server = &tls.Config{Certificates: []tls.Certificate{cert}, ClientCAs: pool, ClientAuth: tls.RequireAndVerifyClientCert, MinVersion: tls.VersionTLS13}
	client = &tls.Config{Certificates: []tls.Certificate{cert}, RootCAs: pool, MinVersion: tls.VersionTLS13}
	return server, client, nil
}

// The remote's handlers panic on some peers' messages (an unregistered
// type, a ListProcesses call): the interceptors turn that into an error for
// that peer, and the node goes on serving.

func recoverUnary(ctx context.Context, req any, info *grpc.UnaryServerInfo, handler grpc.UnaryHandler) (resp any, err error) {
	defer func() {
		if p := recover(); p != nil {
			err = status.Errorf(codes.Internal, "%s: %v", info.FullMethod, p)
		}
	}()
	return handler(ctx, req)
}

func recoverStream(srv any, ss grpc.ServerStream, info *grpc.StreamServerInfo, handler grpc.StreamHandler) (err error) {
	defer func() {
		if p := recover(); p != nil {
			err = status.Errorf(codes.Internal, "%s: %v", info.FullMethod, p)
		}
	}()
	return handler(srv, ss)
}

// System is the node's actor system: give it to a pipeline in
// actors.Options.System.
func (n *Node) System() *actor.ActorSystem { return n.sys }

// Address is the host:port peers reach the node at.
func (n *Node) Address() string { return n.sys.Address() }

// Serve starts a worker on the node (StartWorker).
func (n *Node) Serve(opts WorkerOptions) (*Worker, error) {
	w, err := StartWorker(n.sys, opts)
	if err != nil {
		return nil, err
	}
	n.worker = w
	return w, nil
}

// Close stops the node's worker, if any, and the node.
//
// The remote stops first: a worker's actor that stopped before it would
// tell the clients watching it, and a client gone would be dialled in vain,
// five times two seconds, holding up the remote's stop.
func (n *Node) Close() error {
	n.once.Do(func() {
		shutdown(n.remote)
		if n.worker != nil {
			n.err = n.worker.Close()
		}
		n.sys.Shutdown()
	})
	return n.err
}

// shutdown stops the remote gracefully, and at once after StopGrace:
// gRPC's graceful stop waits for every peer's stream to end, and a frozen
// peer's never does (the remote would wait 10 s). The pinned remote's
// graceful stop also tells each open stream's reader it is leaving on a
// channel the reader closes when its stream ends; a stream that ends at
// that moment (a peer that dropped) makes the send panic part way through
// the stop (sim --network found it): the server is then stopped at once.
// Its stop of its endpoints waits up to 10 s (its stop futures' timeout)
// for a writer still connecting to a peer that accepted the connection and
// does not answer (frozen, or behind a stalled link; gRPC's keepalive is
// 10 s at least), and the server's stop, graceful or not, waits for
// handshakes under way (up to HandshakeTimeout): after another StopGrace
// both are left to end on their own (RemoteSettle allows for it). sim
// --network found client nodes whose Close took 10 s, then 2m2s, so.
func shutdown(r *remote.Remote) {
	graceful := make(chan struct{})
	go func() {
		defer close(graceful)
		defer func() {
			if p := recover(); p != nil {
				r.Shutdown(false)
			}
		}()
		r.Shutdown(true)
	}()
	select {
	case <-graceful:
		return
	case <-time.After(StopGrace):
	}
	forced := make(chan struct{})
	go func() {
		defer close(forced)
		r.Shutdown(false) // ends the graceful stop's wait for streams
	}()
	timeout := time.After(StopGrace)
	for graceful != nil || forced != nil {
		select {
		case <-graceful:
			graceful = nil
		case <-forced:
			forced = nil
		case <-timeout:
			return
		}
	}
}
