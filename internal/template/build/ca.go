package build

import (
	"os"
	"path/filepath"
)

// A RUN step that talks HTTPS (npm install, pip, curl, git) must trust
// what the host trusts: where outbound TLS passes a TLS-inspecting proxy,
// the proxy's CA is in the host's bundle and in no image. The bundle is
// staged in the build's work directory (the build sandbox's /mnt), copied
// by runScript into the build sandbox's own /dev — which it binds into the
// layer's /dev, so the file is never part of a layer — and named to the
// usual TLS clients by environment variables the step itself did not set.
// The template's sandboxes get neither the file nor the variables.

// hostCAFile is the staged bundle's name in the build's work directory.
const hostCAFile = ".host-ca.crt"

// stageHostCA copies Config.HostCABundle into the build's work directory
// (once per build); a host without a bundle stages nothing.
func (j *job) stageHostCA() error {
	if j.s.cfg.HostCABundle == "" {
		return nil
	}
	b, err := os.ReadFile(j.s.cfg.HostCABundle)
	if os.IsNotExist(err) {
		return nil
	}
	if err != nil {
		return err
	}
	if err := os.MkdirAll(j.work, 0o755); err != nil {
		return err
	}
	return os.WriteFile(filepath.Join(j.work, hostCAFile), b, 0o644)
}

// caScript is the part of runScript that puts the staged bundle at
// /dev/.forkbox-host-ca.crt (once $R/dev is bound to the build sandbox's
// /dev) and points the TLS clients' variables at it, unless the step's
// environment already sets them. Debian's OpenSSL reads SSL_CERT_FILE,
// curl CURL_CA_BUNDLE, Node.js (npm) NODE_EXTRA_CA_CERTS, Python's
// requests REQUESTS_CA_BUNDLE, pip PIP_CERT, git GIT_SSL_CAINFO.
const caScript = `CA=/dev/.forkbox-host-ca.crt
case " $m " in *" $R/dev "*)
  if [ -f /mnt/` + hostCAFile + ` ] && cp /mnt/` + hostCAFile + ` "$CA"; then
    for v in SSL_CERT_FILE CURL_CA_BUNDLE NODE_EXTRA_CA_CERTS REQUESTS_CA_BUNDLE PIP_CERT GIT_SSL_CAINFO; do
      eval "[ -n \"\${$v}\" ] || export $v=$CA"
    done
  fi;;
esac
`
