package basicauth

import (
	"crypto/md5"
	"crypto/sha1"
	"crypto/subtle"
	"encoding/base64"
	"errors"
	"strings"

	"golang.org/x/crypto/bcrypt"
)

// The password forms of htpasswd files that nginx accepts and sturdy
// supports: bcrypt ($2a$, $2b$, $2y$, htpasswd -B), Apache's MD5 (apr1,
// htpasswd -m, htpasswd's default), MD5-crypt ($1$), SHA-crypt ($5$, $6$,
// openssl passwd -5/-6), RFC 2307 {SHA} (htpasswd -s), {SSHA} (salted,
// OpenLDAP and Dovecot) and {PLAIN}. nginx also accepts whatever else the
// system's crypt(3) does: DES (htpasswd -d, which truncates passwords to 8
// bytes) and yescrypt ($y$); sturdy refuses those at load, naming the
// user, so that a file is never half-working.

// scheme verifies one stored hash.
type scheme uint8

const (
	schemeBcrypt scheme = iota + 1
	schemeMD5Crypt
	schemeSHACrypt
	schemeSHA
	schemeSSHA
	schemePlain
)

// schemeOf recognises a stored hash or says why it cannot be used.
func schemeOf(h string) (scheme, error) {
	switch {
	case strings.HasPrefix(h, "$2a$"), strings.HasPrefix(h, "$2b$"), strings.HasPrefix(h, "$2y$"):
		if _, err := bcrypt.Cost([]byte(h)); err != nil {
			return 0, errors.New("malformed bcrypt hash")
		}
		return schemeBcrypt, nil
	case strings.HasPrefix(h, "$apr1$"), strings.HasPrefix(h, "$1$"):
		if strings.Count(h, "$") != 3 {
			return 0, errors.New("malformed MD5 hash")
		}
		return schemeMD5Crypt, nil
	case strings.HasPrefix(h, "{SHA}"):
		if b, err := base64.StdEncoding.DecodeString(h[5:]); err != nil || len(b) != sha1.Size {
			return 0, errors.New("malformed {SHA} hash")
		}
		return schemeSHA, nil
	case strings.HasPrefix(h, "{SSHA}"):
		if b, err := base64.StdEncoding.DecodeString(h[6:]); err != nil || len(b) <= sha1.Size {
			return 0, errors.New("malformed {SSHA} hash")
		}
		return schemeSSHA, nil
	case strings.HasPrefix(h, "{PLAIN}"):
		return schemePlain, nil
	case strings.HasPrefix(h, "$5$"), strings.HasPrefix(h, "$6$"):
		if n := strings.Count(h, "$"); n != 3 && !(n == 4 && strings.HasPrefix(h[3:], "rounds=")) {
			return 0, errors.New("malformed SHA-crypt hash")
		}
		return schemeSHACrypt, nil
	case strings.HasPrefix(h, "$y$"), strings.HasPrefix(h, "$7$"):
		return 0, errors.New("yescrypt and scrypt are not supported; regenerate with htpasswd -B (bcrypt)")
	case len(h) == 13 && !strings.ContainsAny(h, "${}"):
		return 0, errors.New("DES crypt (htpasswd -d) is not supported: it keeps only 8 characters of a password; regenerate with htpasswd -B (bcrypt)")
	}
	return 0, errors.New("unknown password format; expected bcrypt ($2y$), apr1, {SHA}, {SSHA} or {PLAIN}; htpasswd -B writes bcrypt")
}

// verify reports whether password matches the stored hash h of scheme s,
// comparing in constant time.
func verify(s scheme, h, password string) bool {
	switch s {
	case schemeBcrypt:
		return bcrypt.CompareHashAndPassword([]byte(h), []byte(password)) == nil
	case schemeMD5Crypt:
		return subtle.ConstantTimeCompare([]byte(md5Crypt(password, h)), []byte(h)) == 1
	case schemeSHACrypt:
		return subtle.ConstantTimeCompare([]byte(shaCrypt(password, h)), []byte(h)) == 1
	case schemeSHA:
		sum := sha1.Sum([]byte(password))
		want, _ := base64.StdEncoding.DecodeString(h[5:])
		return subtle.ConstantTimeCompare(sum[:], want) == 1
	case schemeSSHA:
		b, _ := base64.StdEncoding.DecodeString(h[6:])
		d, salt := b[:sha1.Size], b[sha1.Size:]
		x := sha1.New()
		x.Write([]byte(password))
		x.Write(salt)
		return subtle.ConstantTimeCompare(x.Sum(nil), d) == 1
	case schemePlain:
		return subtle.ConstantTimeCompare([]byte(h[7:]), []byte(password)) == 1
	}
	return false
}

// md5Crypt is Poul-Henning Kamp's MD5-crypt as Apache (magic "$apr1$") and
// glibc ("$1$") write it; setting is the stored hash, whose magic and salt
// are used. It returns the full hash to compare with the stored one.
func md5Crypt(password, setting string) string {
	magic := "$1$"
	if strings.HasPrefix(setting, "$apr1$") {
		magic = "$apr1$"
	}
	salt := strings.TrimPrefix(setting, magic)
	if i := strings.IndexByte(salt, '$'); i >= 0 {
		salt = salt[:i]
	}
	if len(salt) > 8 {
		salt = salt[:8]
	}
	pw := []byte(password)
	alt := md5.Sum([]byte(password + salt + password))
	ctx := md5.New()
	ctx.Write([]byte(password + magic + salt))
	for n := len(pw); n > 0; n -= 16 {
		ctx.Write(alt[:min(n, 16)])
	}
	for i := len(pw); i != 0; i >>= 1 {
		if i&1 != 0 {
			ctx.Write([]byte{0})
		} else {
			ctx.Write(pw[:1])
		}
	}
	final := ctx.Sum(nil)
	for i := range 1000 {
		c := md5.New()
		if i&1 != 0 {
			c.Write(pw)
		} else {
			c.Write(final)
		}
		if i%3 != 0 {
			c.Write([]byte(salt))
		}
		if i%7 != 0 {
			c.Write(pw)
		}
		if i&1 != 0 {
			c.Write(final)
		} else {
			c.Write(pw)
		}
		final = c.Sum(final[:0])
	}
	out := []byte(magic + salt + "$")
	enc := func(v uint32, n int) {
		for range n {
			out = append(out, itoa64[v&0x3f])
			v >>= 6
		}
	}
	for _, g := range [][3]int{{0, 6, 12}, {1, 7, 13}, {2, 8, 14}, {3, 9, 15}, {4, 10, 5}} {
		enc(uint32(final[g[0]])<<16|uint32(final[g[1]])<<8|uint32(final[g[2]]), 4)
	}
	enc(uint32(final[11]), 2)
	return string(out)
}
