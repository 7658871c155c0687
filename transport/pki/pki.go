package pki

import (
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
	"strings"
	"time"

	"github.com/pkg/errors"

	"github.com/pipemare/pipemare/transport"
)

// Validity is how long the certificates Write makes are valid.
const Validity = 365 * 24 * time.Hour

// CA is a certificate authority that issues peers' certificates.
type CA struct {
	cert *x509.Certificate
	key  *ecdsa.PrivateKey
	der  []byte
}

// NewCA makes a self-signed CA named name.
func NewCA(name string) (*CA, error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, err
	}
	tmpl, err := template(name)
	if err != nil {
		return nil, err
	}
	tmpl.IsCA, tmpl.BasicConstraintsValid, tmpl.MaxPathLenZero = true, true, true
	tmpl.KeyUsage = x509.KeyUsageCertSign | x509.KeyUsageCRLSign
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		return nil, err
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		return nil, err
	}
	return &CA{cert: cert, key: key, der: der}, nil
}

// PEM is the CA's certificate, the file every peer verifies the others
// against.
func (ca *CA) PEM() []byte { return pemBlock("CERTIFICATE", ca.der) }

// Issue makes a key and a certificate for peer p: a stage's is valid for
// hosts (names or IP addresses; the host its peers dial must be one) and
// serves and dials; the driver's only dials. It returns both as PEM.
func (ca *CA) Issue(p transport.Peer, hosts []string) (certPEM, keyPEM []byte, err error) {
	if p != transport.Driver && len(hosts) == 0 {
		return nil, nil, errors.Errorf("%v: no host to make its certificate valid for", p)
	}
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, nil, err
	}
	tmpl, err := template("pipemare " + p.String())
	if err != nil {
		return nil, nil, err
	}
	tmpl.KeyUsage = x509.KeyUsageDigitalSignature
	tmpl.ExtKeyUsage = []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}
	if p != transport.Driver {
		tmpl.ExtKeyUsage = append(tmpl.ExtKeyUsage, x509.ExtKeyUsageServerAuth)
	}
	for _, h := range hosts {
		if ip := net.ParseIP(h); ip != nil {
			tmpl.IPAddresses = append(tmpl.IPAddresses, ip)
		} else if h != "" {
			tmpl.DNSNames = append(tmpl.DNSNames, h)
		}
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca.cert, &key.PublicKey, ca.key)
	if err != nil {
		return nil, nil, errors.Wrapf(err, "%v", p)
	}
	k, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		return nil, nil, err
	}
	return pemBlock("CERTIFICATE", der), pemBlock("EC PRIVATE KEY", k), nil
}

func template(cn string) (*x509.Certificate, error) {
	serial, err := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 128))
	if err != nil {
		return nil, err
	}
	now := time.Now()
	return &x509.Certificate{
		SerialNumber: serial,
		Subject:      pkix.Name{CommonName: cn, Organization: []string{"pipemare"}},
		NotBefore:    now.Add(-time.Hour), // tolerate clocks a little apart
		NotAfter:     now.Add(Validity),
	}, nil
}

func pemBlock(typ string, der []byte) []byte {
	return pem.EncodeToMemory(&pem.Block{Type: typ, Bytes: der})
}

// Name is the base name of peer p's files: "driver", "stage-2".
func Name(p transport.Peer) string {
	if p == transport.Driver {
		return "driver"
	}
	return "stage-" + strings.TrimPrefix(p.String(), "stage ")
}

// Write makes a new CA in dir (created if missing) and certificates for
// the driver and for stage i valid for stageHosts[i], one stage per host
// (WriteHosts).
func Write(dir string, stageHosts []string) error {
	hosts := make([][]string, len(stageHosts))
	for i, h := range stageHosts {
		hosts[i] = []string{h}
	}
	return WriteHosts(dir, hosts)
}

// WriteHosts makes a new CA in dir (created if missing) and certificates
// for the driver and for stage i valid for each host of stageHosts[i]:
// every host a stage may run on, when which process hosts it is decided
// once the model is cut. It refuses to overwrite existing files. Keys are
// written readable by their owner only.
func WriteHosts(dir string, stageHosts [][]string) error {
	if len(stageHosts) == 0 {
		return errors.New("no stage hosts: give one host (name or IP address) per stage, in stage order")
	}
	for i, hs := range stageHosts {
		if len(hs) == 0 {
			return errors.Errorf("stage %d: no host to make its certificate valid for", i)
		}
		for _, h := range hs {
			if net.ParseIP(h) == nil && (strings.TrimSpace(h) == "" || strings.ContainsAny(h, " :/[]")) {
				return errors.Errorf("host %d %q: give a host name or an IP address, without a port", i, h)
			}
		}
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	ca, err := NewCA("pipemare CA")
	if err != nil {
		return err
	}
	caKey, err := x509.MarshalECPrivateKey(ca.key)
	if err != nil {
		return err
	}
	files := []file{{"ca.pem", ca.PEM(), 0o644}, {"ca-key.pem", pemBlock("EC PRIVATE KEY", caKey), 0o600}}
	for p := transport.Driver; int(p) < len(stageHosts); p++ {
		var hosts []string
		if p != transport.Driver {
			hosts = stageHosts[p]
		}
		cert, key, err := ca.Issue(p, hosts)
		if err != nil {
			return err
		}
		files = append(files, file{Name(p) + ".pem", cert, 0o644}, file{Name(p) + "-key.pem", key, 0o600})
	}
	for _, f := range files {
		if _, err := os.Stat(filepath.Join(dir, f.name)); err == nil {
			return errors.Errorf("%s exists: remove it or write to another directory", filepath.Join(dir, f.name))
		}
	}
	for _, f := range files {
		if err := writeNew(filepath.Join(dir, f.name), f.data, f.mode); err != nil {
			return err
		}
	}
	return nil
}

type file struct {
	name string
	data []byte
	mode os.FileMode
}

// writeNew writes a file that must not exist, and syncs it.
func writeNew(path string, data []byte, mode os.FileMode) error {
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, mode)
	if err != nil {
		return err
	}
	if _, err := f.Write(data); err != nil {
		_ = f.Close()
		return errors.Wrapf(err, "writing %s", path)
	}
	if err := f.Sync(); err != nil {
		_ = f.Close()
		return errors.Wrapf(err, "writing %s", path)
	}
	return errors.Wrapf(f.Close(), "writing %s", path)
}

// Load reads peer p's credentials from a directory Write made: the CA to
// verify the other peers against and p's certificate.
func Load(dir string, p transport.Peer) (*x509.CertPool, tls.Certificate, error) {
	return LoadFiles(filepath.Join(dir, "ca.pem"), filepath.Join(dir, Name(p)+".pem"), filepath.Join(dir, Name(p)+"-key.pem"))
}

// LoadFiles reads a CA certificate (PEM, one or more) and a peer's
// certificate and key (PEM).
func LoadFiles(caFile, certFile, keyFile string) (*x509.CertPool, tls.Certificate, error) {
	caPEM, err := os.ReadFile(caFile)
	if err != nil {
		return nil, tls.Certificate{}, errors.Wrap(err, "reading the CA")
	}
	roots := x509.NewCertPool()
	if !roots.AppendCertsFromPEM(caPEM) {
		return nil, tls.Certificate{}, errors.Errorf("%s holds no PEM certificate", caFile)
	}
	cert, err := tls.LoadX509KeyPair(certFile, keyFile)
	if err != nil {
		return nil, tls.Certificate{}, errors.Wrapf(err, "loading %s and %s", certFile, keyFile)
	}
	return roots, cert, nil
}
