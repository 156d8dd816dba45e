package bearer

import "testing"

func TestToken(t *testing.T) {
	if New("").Set() || New("").Matches("") {
		t.Fatal("an empty token is not configured and matches nothing")
	}
	tok := New("s3cret")
	if !tok.Set() || !tok.Matches("s3cret") || tok.Matches("s3cre") || tok.Matches("") {
		t.Fatal("a configured token matches itself only")
	}
}
