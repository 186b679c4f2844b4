#!/bin/sh
# Makes a local certificate authority and a broker certificate it signed, for
# deploy/docker-compose.secure.yml (or any dev broker with an SSL or SASL_SSL
# listener), with openssl:
#
#   deploy/make-dev-ca.sh [DIR]        (DIR defaults to deploy/certs)
#
# DIR then holds ca.pem (what clients trust: ssl.ca.location), broker.pem (the
# broker's key and certificate chain, its --ssl-keystore-location), and
# app.properties (the example app's kcat settings: SASL_SSL, SCRAM-SHA-512 as
# app/app-secret). The certificate names sluice, localhost and 127.0.0.1, so
# clients on the compose network and on the host can check the host name; add
# names with SLUICE_CERT_NAMES="DNS:broker.example,IP:10.0.0.5". Development
# only: the key is readable by every user, so that the broker's user in its
# container can read it from a bind mount. Run it again to rotate: the broker
# reads the new files without a restart.
set -eu
dir=${1:-$(dirname "$0")/certs}
names="DNS:sluice,DNS:localhost,IP:127.0.0.1${SLUICE_CERT_NAMES:+,$SLUICE_CERT_NAMES}"
mkdir -p "$dir"
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
if [ ! -f "$dir/ca.pem" ] || [ ! -f "$dir/ca.key" ]; then
    openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes -days 825 \
        -subj "/CN=Sluice dev CA" -keyout "$dir/ca.key" -out "$dir/ca.pem" 2>/dev/null
fi
openssl req -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes -subj "/CN=sluice" \
    -keyout "$work/broker.key" -out "$work/broker.csr" 2>/dev/null
printf 'subjectAltName=%s\n' "$names" >"$work/san.ext"
openssl x509 -req -in "$work/broker.csr" -CA "$dir/ca.pem" -CAkey "$dir/ca.key" \
    -CAcreateserial -CAserial "$work/ca.srl" -days 825 -extfile "$work/san.ext" \
    -out "$work/broker.crt" 2>/dev/null
cat "$work/broker.crt" "$work/broker.key" >"$work/broker.pem"
mv "$work/broker.pem" "$dir/broker.pem"
cat >"$dir/app.properties" <<'PROPERTIES'
security.protocol=SASL_SSL
sasl.mechanisms=SCRAM-SHA-512
sasl.username=app
sasl.password=app-secret
ssl.ca.location=/certs/ca.pem
PROPERTIES
chmod 755 "$dir"
chmod 644 "$dir/ca.pem" "$dir/broker.pem" "$dir/app.properties"
chmod 600 "$dir/ca.key"
echo "certificates in $dir: ca.pem, broker.pem ($names), app.properties"
