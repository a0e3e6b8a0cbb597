package stack

// BeforeSaveForTest runs the hook a checkpoint runs on the stack: forkbox's
// patch 0002 test drives it from the external test package.
func (s *Stack) BeforeSaveForTest() { s.beforeSave() }
