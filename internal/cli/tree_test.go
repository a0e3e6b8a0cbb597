package cli

import (
	"bytes"
	"testing"

	"github.com/forkbox/forkbox/client"
)

func TestRenderLineageGolden(t *testing.T) {
	root := &client.LineageNode{ID: "sbx1", Kind: "sandbox", Origin: "create", State: "running", Children: []*client.LineageNode{
		{ID: "snap2", Kind: "snapshot", Origin: "snapshot", State: "ready", Children: []*client.LineageNode{
			{ID: "sbx3", Kind: "sandbox", Origin: "clone", State: "running"},
			{ID: "sbx4", Kind: "sandbox", Origin: "clone", State: "paused", Children: []*client.LineageNode{
				{ID: "snap6", Kind: "snapshot", Origin: "snapshot"},
			}},
		}},
		{ID: "snap5", Kind: "snapshot", Origin: "rollback", State: "ready"},
	}}
	const want = `ID              KIND      ORIGIN    STATE
sbx1            sandbox   create    running
├─ snap2        snapshot  snapshot  ready
│  ├─ sbx3 *    sandbox   clone     running
│  └─ sbx4      sandbox   clone     paused
│     └─ snap6  snapshot  snapshot  -
└─ snap5        snapshot  rollback  ready
`
	var buf bytes.Buffer
	if err := renderLineage(&buf, root, "sbx3"); err != nil {
		t.Fatal(err)
	}
	if buf.String() != want {
		t.Errorf("got:\n%s\nwant:\n%s", buf.String(), want)
	}
}
