package chain

import (
	"slices"
	"strings"

	"github.com/apache/iceberg-go"
)

// Orphan cleanup compares a listed file with the files the table
// references by canonical path (package internal/location), because the two
// come from different writers that spell one file differently.

// hiddenFilter is Iceberg Java's PartitionAwareHiddenPathFilter as
// DeleteOrphanFiles applies it to every file and folder under the table
// location: a name starting with "_" or "." is hidden (Hadoop's _SUCCESS,
// _temporary/, .crc sidecars) unless it starts with "<field>=" for a
// partition field, of any of the table's specs, whose name itself starts
// with "_" or ".". A hidden folder hides everything below it.
type hiddenFilter struct {
	partitionPrefixes []string
}

// newHiddenFilter collects the partition names of every spec.
func newHiddenFilter(specs []iceberg.PartitionSpec) hiddenFilter {
	var h hiddenFilter
	for _, spec := range specs {
		for _, f := range spec.Fields() {
			if strings.HasPrefix(f.Name, "_") || strings.HasPrefix(f.Name, ".") {
				p := f.Name + "="
				if !slices.Contains(h.partitionPrefixes, p) {
					h.partitionPrefixes = append(h.partitionPrefixes, p)
				}
			}
		}
	}
	return h
}

// hiddenName reports whether one path segment is hidden.
func (h hiddenFilter) hiddenName(name string) bool {
	if !strings.HasPrefix(name, "_") && !strings.HasPrefix(name, ".") {
		return false
	}
	for _, p := range h.partitionPrefixes {
		if strings.HasPrefix(name, p) {
			return false
		}
	}
	return true
}

// hiddenRel reports whether a slash-separated path relative to the table
// location has a hidden segment.
func (h hiddenFilter) hiddenRel(rel string) bool {
	for seg := range strings.SplitSeq(rel, "/") {
		if h.hiddenName(seg) {
			return true
		}
	}
	return false
}
