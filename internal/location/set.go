package location

// Set is a set of locations keyed by canonical form, so that a member is
// found under any of its spellings. It remembers the first spelling added
// for each object, for messages that name both spellings. A Set is not
// safe for concurrent use.
type Set struct {
	n Normaliser
	// full maps Canonical.Full to the first spelling added.
	full map[string]string
	// key maps the Canonical.Key of every URI member (Key != Full) to the
	// first spelling added, to find a location that differs only in
	// scheme or authority.
	key map[string]string
}

// NewSet returns an empty Set that canonicalises with n.
func (n Normaliser) NewSet() *Set {
	return &Set{n: n, full: map[string]string{}, key: map[string]string{}}
}

// Add adds p; the empty location names nothing and is not added.
func (s *Set) Add(p string) {
	if p == "" {
		return
	}
	c := s.n.Canon(p)
	if _, ok := s.full[c.Full]; !ok {
		s.full[c.Full] = p
	}
	if c.Key != c.Full {
		if _, ok := s.key[c.Key]; !ok {
			s.key[c.Key] = p
		}
	}
}

// Has reports whether a member is the same object as p.
func (s *Set) Has(p string) bool {
	_, ok := s.Lookup(p)
	return ok
}

// Lookup returns the spelling of the member that is the same object as p.
func (s *Set) Lookup(p string) (string, bool) {
	if p == "" {
		return "", false
	}
	other, ok := s.full[s.n.Canon(p).Full]
	return other, ok
}

// LookupPath returns the spelling of a member with p's path under any
// scheme or authority: the same object as p (what Lookup finds), or the
// same path under a scheme or authority no equivalence maps to p's, which
// may be the same object (s3://b/k listed, gs://b/k referenced;
// hdfs://nn1/k and hdfs://nn2/k of one HA cluster). A local path and a
// URI with that path match too, as Spark's remove_orphan_files compares
// paths without scheme and authority.
func (s *Set) LookupPath(p string) (string, bool) {
	if p == "" {
		return "", false
	}
	c := s.n.Canon(p)
	if other, ok := s.full[c.Full]; ok {
		return other, true
	}
	if other, ok := s.key[c.Key]; ok {
		return other, true
	}
	if c.Key != c.Full {
		if other, ok := s.full[c.Key]; ok {
			return other, true
		}
	}
	return "", false
}

// Len returns the number of distinct objects in s.
func (s *Set) Len() int { return len(s.full) }
