// Package pki writes and loads the certificates of a pipeline's mutual TLS:
// a certificate authority and, per peer, an ECDSA P-256 key and a
// certificate signed by it. It is for trying a multi-host pipeline
// (pipemare certs); in production use the certificates of your own CA
// (cert-manager, Vault, …): LoadFiles takes any PEM files.
//
// Write lays out a directory:
//
//	ca.pem, ca-key.pem          the CA (keep ca-key.pem away from the peers)
//	driver.pem, driver-key.pem  the driver's client certificate
//	stage-0.pem, stage-0-key.pem … one per stage, valid for its host
//
// and Load reads one peer's credentials back from it.
package pki
