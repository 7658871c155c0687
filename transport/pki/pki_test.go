package pki

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/x509"
	"fmt"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/pipemare/pipemare/transport"
)

// TestWriteAndLoad: the files Write makes load back; each stage's
// certificate verifies against the CA for its own host and no other, as a
// server and a client; the driver's only as a client; keys are P-256 and
// private to their owner.
func TestWriteAndLoad(t *testing.T) {
	dir := t.TempDir()
	hosts := []string{"pm-stage-0-0.pm", "10.1.2.3", "::1"}
	require.NoError(t, Write(dir, hosts))
	for p := transport.Driver; int(p) < len(hosts); p++ {
		roots, cert, err := Load(dir, p)
		require.NoError(t, err, "%v", p)
		leaf, err := x509.ParseCertificate(cert.Certificate[0])
		require.NoError(t, err)
		key, ok := cert.PrivateKey.(*ecdsa.PrivateKey)
		require.True(t, ok)
		require.Equal(t, elliptic.P256(), key.Curve)
		client := x509.VerifyOptions{Roots: roots, KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}}
		_, err = leaf.Verify(client)
		require.NoError(t, err, "%v as a client", p)
		info, err := os.Stat(filepath.Join(dir, Name(p)+"-key.pem"))
		require.NoError(t, err)
		require.Equal(t, os.FileMode(0o600), info.Mode().Perm())
		server := x509.VerifyOptions{Roots: roots, KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}}
		if p == transport.Driver {
			server.DNSName = "anything"
			_, err = leaf.Verify(server)
			require.Error(t, err, "the driver does not serve")
			continue
		}
		server.DNSName = hosts[p]
		_, err = leaf.Verify(server)
		require.NoError(t, err, "%v for %s", p, hosts[p])
		server.DNSName = hosts[(int(p)+1)%len(hosts)]
		_, err = leaf.Verify(server)
		var host x509.HostnameError
		require.ErrorAs(t, err, &host, "%v is not valid for another stage's host", p)
	}
	info, err := os.Stat(filepath.Join(dir, "ca-key.pem"))
	require.NoError(t, err)
	require.Equal(t, os.FileMode(0o600), info.Mode().Perm())
}

func TestWriteRefuses(t *testing.T) {
	dir := t.TempDir()
	require.NoError(t, Write(dir, []string{"a"}))
	require.ErrorContains(t, Write(dir, []string{"a"}), "ca.pem exists: remove it or write to another directory")
	require.ErrorContains(t, Write(t.TempDir(), nil), "give one host (name or IP address) per stage")
	require.ErrorContains(t, Write(t.TempDir(), []string{"a:7000"}), `host 0 "a:7000": give a host name or an IP address, without a port`)
	_, _, err := Load(t.TempDir(), 0)
	require.ErrorContains(t, err, "reading the CA")
}

// TestCertificatesOfAnotherCADoNotVerify: two runs of Write make two CAs
// that do not trust each other's certificates.
func TestCertificatesOfAnotherCADoNotVerify(t *testing.T) {
	a, b := t.TempDir(), t.TempDir()
	require.NoError(t, Write(a, []string{"h"}))
	require.NoError(t, Write(b, []string{"h"}))
	rootsA, _, err := Load(a, 0)
	require.NoError(t, err)
	_, certB, err := Load(b, 0)
	require.NoError(t, err)
	leaf, err := x509.ParseCertificate(certB.Certificate[0])
	require.NoError(t, err)
	_, err = leaf.Verify(x509.VerifyOptions{Roots: rootsA, DNSName: "h"})
	require.ErrorContains(t, err, "certificate signed by unknown authority")
}

func ExampleWrite() {
	dir, _ := os.MkdirTemp("", "certs")
	defer os.RemoveAll(dir)
	if err := Write(dir, []string{"127.0.0.1", "127.0.0.1"}); err != nil {
		fmt.Println(err)
		return
	}
	entries, _ := os.ReadDir(dir)
	for _, e := range entries {
		fmt.Println(e.Name())
	}
	// Stage 1's process loads its own credentials:
	_, cert, err := Load(dir, 1)
	fmt.Println(len(cert.Certificate), err)
	// Output:
	// ca-key.pem
	// ca.pem
	// driver-key.pem
	// driver.pem
	// stage-0-key.pem
	// stage-0.pem
	// stage-1-key.pem
	// stage-1.pem
	// 1 <nil>
}
