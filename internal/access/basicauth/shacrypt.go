package basicauth

import (
	"crypto/sha256"
	"crypto/sha512"
	"hash"
	"strconv"
	"strings"
)

// shaCrypt is Ulrich Drepper's SHA-crypt ($5$ SHA-256, $6$ SHA-512), as
// glibc's crypt(3) and openssl passwd -5/-6 write it; setting is the
// stored hash, whose magic, rounds and salt are used. It returns the full
// hash to compare with the stored one.
func shaCrypt(password, setting string) string {
	magic, newHash, size := "$5$", sha256.New, sha256.Size
	if strings.HasPrefix(setting, "$6$") {
		magic, newHash, size = "$6$", sha512.New, sha512.Size
	}
	rest := strings.TrimPrefix(setting, magic)
	rounds, custom := 5000, false
	if r, ok := strings.CutPrefix(rest, "rounds="); ok {
		if n, tail, ok := strings.Cut(r, "$"); ok {
			if v, err := strconv.Atoi(n); err == nil {
				rounds, custom, rest = min(max(v, 1000), 999_999_999), true, tail
			}
		}
	}
	salt, _, _ := strings.Cut(rest, "$")
	if len(salt) > 16 {
		salt = salt[:16]
	}
	pw, s := []byte(password), []byte(salt)
	sum := func(parts ...[]byte) []byte {
		h := newHash()
		for _, p := range parts {
			h.Write(p)
		}
		return h.Sum(nil)
	}
	b := sum(pw, s, pw)
	a := newHash()
	a.Write(pw)
	a.Write(s)
	n := len(pw)
	for ; n > size; n -= size {
		a.Write(b)
	}
	a.Write(b[:n])
	for n := len(pw); n > 0; n >>= 1 {
		if n&1 != 0 {
			a.Write(b)
		} else {
			a.Write(pw)
		}
	}
	c := a.Sum(nil)
	p := repeatDigest(newHash, pw, len(pw), len(pw))
	sr := repeatDigest(newHash, s, 16+int(c[0]), len(s))
	for i := range rounds {
		h := newHash()
		if i&1 != 0 {
			h.Write(p)
		} else {
			h.Write(c)
		}
		if i%3 != 0 {
			h.Write(sr)
		}
		if i%7 != 0 {
			h.Write(p)
		}
		if i&1 != 0 {
			h.Write(c)
		} else {
			h.Write(p)
		}
		c = h.Sum(c[:0])
	}
	out := []byte(magic)
	if custom {
		out = append(out, "rounds="+strconv.Itoa(rounds)+"$"...)
	}
	out = append(out, salt...)
	out = append(out, '$')
	order := sha256Order
	if size == sha512.Size {
		order = sha512Order
	}
	for _, g := range order {
		var w uint32
		for _, i := range g[:3] {
			w <<= 8
			if i >= 0 {
				w |= uint32(c[i])
			}
		}
		for range g[3] {
			out = append(out, itoa64[w&0x3f])
			w >>= 6
		}
	}
	return string(out)
}

// repeatDigest hashes data times times and stretches the digest to n bytes.
func repeatDigest(newHash func() hash.Hash, data []byte, times, n int) []byte {
	h := newHash()
	for range times {
		h.Write(data)
	}
	d := h.Sum(nil)
	out := make([]byte, 0, n)
	for len(out)+len(d) <= n {
		out = append(out, d...)
	}
	return append(out, d[:n-len(out)]...)
}

const itoa64 = "./0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz"

// The byte order of the encoded digest: three byte indexes (-1: zero) and
// how many characters they give.
var sha256Order = [][4]int{
	{0, 10, 20, 4}, {21, 1, 11, 4}, {12, 22, 2, 4}, {3, 13, 23, 4}, {24, 4, 14, 4},
	{15, 25, 5, 4}, {6, 16, 26, 4}, {27, 7, 17, 4}, {18, 28, 8, 4}, {9, 19, 29, 4},
	{-1, 31, 30, 3},
}

var sha512Order = [][4]int{
	{0, 21, 42, 4}, {22, 43, 1, 4}, {44, 2, 23, 4}, {3, 24, 45, 4}, {25, 46, 4, 4},
	{47, 5, 26, 4}, {6, 27, 48, 4}, {28, 49, 7, 4}, {50, 8, 29, 4}, {9, 30, 51, 4},
	{31, 52, 10, 4}, {53, 11, 32, 4}, {12, 33, 54, 4}, {34, 55, 13, 4}, {56, 14, 35, 4},
	{15, 36, 57, 4}, {37, 58, 16, 4}, {59, 17, 38, 4}, {18, 39, 60, 4}, {40, 61, 19, 4},
	{62, 20, 41, 4}, {-1, -1, 63, 2},
}
