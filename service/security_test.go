//go:build !race

package service_test

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	"github.com/asynkron/protoactor-go/remote"
	"github.com/stretchr/testify/require"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"

	"github.com/actorfeed/actorfeed/actors"
	"github.com/actorfeed/actorfeed/internal/testutil"
	"github.com/actorfeed/actorfeed/service"
)

// authority is a CA that signs node certificates for 127.0.0.1.
type authority struct {
	cert *x509.Certificate
	key  *ecdsa.PrivateKey
	pem  string // the CA certificate's file
}

func newAuthority(t *testing.T, dir, name string) *authority {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	require.NoError(t, err)
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: name}, NotBefore: time.Now().Add(-time.Hour),
		NotAfter: time.Now().Add(time.Hour), IsCA: true, BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	require.NoError(t, err)
	cert, err := x509.ParseCertificate(der)
	require.NoError(t, err)
	a := &authority{cert: cert, key: key, pem: filepath.Join(dir, name+".pem")}
	writePEM(t, a.pem, "CERTIFICATE", der)
	return a
}

// issue writes a node certificate and key valid for client and server use,
// and returns the TLS files of a node holding them.
func (a *authority) issue(t *testing.T, dir, name string) service.TLS {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	require.NoError(t, err)
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(2), Subject: pkix.Name{CommonName: name}, NotBefore: time.Now().Add(-time.Hour),
		NotAfter: time.Now().Add(time.Hour), IPAddresses: []net.IP{net.IPv4(127, 0, 0, 1)}, KeyUsage: x509.KeyUsageDigitalSignature,
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageClientAuth}}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, a.cert, &key.PublicKey, a.key)
	require.NoError(t, err)
	kder, err := x509.MarshalECPrivateKey(key)
	require.NoError(t, err)
	files := service.TLS{Cert: filepath.Join(dir, name+".pem"), Key: filepath.Join(dir, name+"-key.pem"), CA: a.pem}
	writePEM(t, files.Cert, "CERTIFICATE", der)
	writePEM(t, files.Key, "EC PRIVATE KEY", kder)
	return files
}

func writePEM(t *testing.T, path, kind string, der []byte) {
	t.Helper()
	require.NoError(t, os.WriteFile(path, pem.EncodeToMemory(&pem.Block{Type: kind, Bytes: der}), 0o600))
}

// dial connects to a node's gRPC server as a peer with these credentials.
func dial(t *testing.T, addr string, creds credentials.TransportCredentials) remote.RemotingClient {
	t.Helper()
	conn, err := grpc.NewClient(addr, grpc.WithTransportCredentials(creds))
	require.NoError(t, err)
	t.Cleanup(func() { conn.Close() })
	return remote.NewRemotingClient(conn)
}

// peerTLS is the client side of a peer holding files' certificate.
func peerTLS(t *testing.T, files service.TLS, ca string) credentials.TransportCredentials {
	t.Helper()
	cert, err := tls.LoadX509KeyPair(files.Cert, files.Key)
	require.NoError(t, err)
	pemCA, err := os.ReadFile(ca)
	require.NoError(t, err)
	pool := x509.NewCertPool()
	require.True(t, pool.AppendCertsFromPEM(pemCA))
	return credentials.NewTLS(&tls.Config{Certificates: []tls.Certificate{cert}, RootCAs: pool, MinVersion: tls.VersionTLS13})
}

// listProcesses calls the remote's ListProcesses, which panics in the
// pinned protoactor-go ("implement me").
func listProcesses(c remote.RemotingClient) error {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	_, err := c.ListProcesses(ctx, &remote.ListProcessesRequest{})
	return err
}

// A node with mutual TLS refuses a plaintext peer and a peer whose
// certificate another CA signed; a peer with a certificate of its CA gets
// through, and the panics its calls cause in the remote's handlers (an
// unregistered message type, ListProcesses) are answered with an error
// while the node goes on serving.
func TestServiceTLSNodeAdmitsOnlyPeersOfItsCA(t *testing.T) {
	dir := t.TempDir()
	ca, stranger := newAuthority(t, dir, "ca"), newAuthority(t, dir, "stranger-ca")
	node, err := service.Listen(service.Config{TLS: ca.issue(t, dir, "node")})
	require.NoError(t, err)
	defer func() { require.NoError(t, node.Close()) }()

	err = listProcesses(dial(t, node.Address(), insecure.NewCredentials()))
	require.Equal(t, codes.Unavailable, status.Code(err), "a plaintext peer: %v", err)
	err = listProcesses(dial(t, node.Address(), peerTLS(t, stranger.issue(t, dir, "stranger"), ca.pem)))
	require.Equal(t, codes.Unavailable, status.Code(err), "a peer of another CA: %v", err)

	peer := dial(t, node.Address(), peerTLS(t, ca.issue(t, dir, "peer"), ca.pem))
	require.Equal(t, codes.Internal, status.Code(listProcesses(peer)), "a panic recovered")
	sendUnregistered(t, peer, node.Address())
	require.Equal(t, codes.Internal, status.Code(listProcesses(peer)), "the node still serves")
}

// sendUnregistered sends a node a message whose type no one registered,
// which makes the pinned remote's reader dereference nil: the stream ends
// with an error, and the node lives.
func sendUnregistered(t *testing.T, c remote.RemotingClient, addr string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	stream, err := c.Receive(ctx)
	require.NoError(t, err)
	require.NoError(t, stream.Send(&remote.RemoteMessage{MessageType: &remote.RemoteMessage_ConnectRequest{ConnectRequest: &remote.ConnectRequest{
		ConnectionType: &remote.ConnectRequest_ServerConnection{ServerConnection: &remote.ServerConnection{SystemId: "x", Address: "127.0.0.1:1"}}}}}))
	_, err = stream.Recv()
	require.NoError(t, err, "the connect response")
	require.NoError(t, stream.Send(&remote.RemoteMessage{MessageType: &remote.RemoteMessage_MessageBatch{MessageBatch: &remote.MessageBatch{
		TypeNames: []string{"no.such.Type"}, Targets: []*actor.PID{actor.NewPID(addr, actors.WorkerName)},
		Envelopes: []*remote.MessageEnvelope{{TypeId: 0, MessageData: []byte{1, 2, 3}, Target: 0, SerializerId: 0}}}}}))
	_, err = stream.Recv()
	require.Error(t, err)
}

// A node refuses to listen beyond loopback without mutual TLS.
func TestServiceListenBeyondLoopbackNeedsTLS(t *testing.T) {
	_, err := service.Listen(service.Config{Listen: "0.0.0.0:0"})
	require.ErrorIs(t, err, service.ErrInsecure)
	_, err = service.Listen(service.Config{Listen: "127.0.0.1:0", TLS: service.TLS{Cert: "x.pem"}})
	require.ErrorIs(t, err, service.ErrConfig)
}

// A trainer and a worker with mutual TLS make the batches of one process.
func TestServiceOverMutualTLS(t *testing.T) {
	ctx := testutil.Context(t)
	paths := testutil.WriteFiles(t, 6, 200, 50)
	want := reference(t, ctx, paths, 1)

	dir := t.TempDir()
	ca := newAuthority(t, dir, "ca")
	w := ca.issue(t, dir, "worker")
	ws := startWorkers(t, 1, filepath.Dir(paths[0]), workerTLS+"="+w.Cert+","+w.Key+","+w.CA)
	node, err := service.Listen(service.Config{TLS: ca.issue(t, dir, "trainer")})
	require.NoError(t, err)
	t.Cleanup(func() { require.NoError(t, node.Close()) })
	p := servicePipeline(t, paths, node, &actors.Service{Workers: addrs(ws), Lease: time.Second})
	got := passes(t, ctx, p, 1, nil)
	require.NoError(t, p.Close())
	require.Equal(t, want, got)
}
