package errlog

import "sort"

// Count is a key and how often it was seen.
type Count struct {
	Key string `json:"key"`
	N   int    `json:"n"`
}

// counter counts keys, tracking at most max distinct ones; later new keys
// are summed in other, so memory stays bounded on hostile logs.
type counter struct {
	m     map[string]int
	max   int
	other int
	total int
}

func newCounter(max int) *counter { return &counter{m: map[string]int{}, max: max} }

func (c *counter) add(k string, n int) {
	c.total += n
	if _, ok := c.m[k]; ok || len(c.m) < c.max {
		c.m[k] += n
		return
	}
	c.other += n
}

// top returns the n most frequent keys, most frequent first, ties by key.
func (c *counter) top(n int) []Count {
	out := make([]Count, 0, len(c.m))
	for k, v := range c.m {
		out = append(out, Count{k, v})
	}
	sort.Slice(out, func(i, j int) bool {
		if out[i].N != out[j].N {
			return out[i].N > out[j].N
		}
		return out[i].Key < out[j].Key
	})
	if len(out) > n {
		out = out[:n]
	}
	return out
}

// distinct is the number of distinct keys seen (a lower bound once the
// counter overflowed).
func (c *counter) distinct() int {
	d := len(c.m)
	if c.other > 0 {
		d++
	}
	return d
}
