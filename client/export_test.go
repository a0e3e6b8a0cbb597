package client

// DecodeLineageForTest exposes decodeLineage to the external tests.
var DecodeLineageForTest = decodeLineage
