package codeinterp

import (
	"strings"

	"github.com/dop251/goja/ast"
	"github.com/dop251/goja/parser"
	"github.com/evanw/esbuild/pkg/api"
)

// ijavascript 5.2.1 runs a cell as a script, where await is a syntax
// error. A cell with top-level await is therefore rewritten as Node's
// REPL does: its statements run in an async function whose promise nel's
// $$.sendResult awaits, its last expression is returned as the cell's
// value, and its top-level declarations become assignments to global
// variables declared before the function, so they persist across cells.
// goja's parser (the maintained Go ECMAScript parser with positions)
// gives the statements; esbuild says whether a cell needs this at all.
const (
	awaitHead = "(async () => {\n"
	awaitTail = "\n})()"
)

// needsAwaitWrap reports whether esbuild rejects the JavaScript cell
// only for its top-level await.
func needsAwaitWrap(code string, loader api.Loader) bool {
	r := api.Transform(code, api.TransformOptions{Loader: loader, Format: api.FormatCommonJS, Target: api.ES2022})
	for _, m := range r.Errors {
		if strings.Contains(m.Text, "Top-level await") {
			return true
		}
	}
	return false
}

// transformJavaScript wraps a JavaScript cell with top-level await and
// leaves every other cell as it is.
func transformJavaScript(code string) (string, error) {
	if !needsAwaitWrap(code, api.LoaderJS) {
		return code, nil
	}
	return wrapTopLevelAwait(code), nil
}

// wrapTopLevelAwait rewrites js (see above). Code the parser cannot read
// is returned unchanged, so the kernel reports the error.
func wrapTopLevelAwait(js string) string {
	src := awaitHead + js + awaitTail
	prog, err := parser.ParseFile(nil, "cell.js", src, 0)
	if err != nil || len(prog.Body) != 1 {
		return js
	}
	fn, ok := asyncBody(prog.Body[0])
	if !ok {
		return js
	}
	text := func(n ast.Node) string { return src[n.Idx0()-1 : n.Idx1()-1] }
	var hoisted []string
	var out strings.Builder
	pos := len(awaitHead)
	for i, st := range fn.List {
		start, end := int(st.Idx0())-1, int(st.Idx1())-1
		out.WriteString(src[pos:start])
		pos = end
		switch s := st.(type) {
		case *ast.LexicalDeclaration:
			hoisted = assignBindings(&out, s.List, text, hoisted)
		case *ast.VariableStatement:
			hoisted = assignBindings(&out, s.List, text, hoisted)
		case *ast.FunctionDeclaration:
			name := s.Function.Name.Name.String()
			hoisted = append(hoisted, name)
			out.WriteString(text(st) + "\nglobalThis." + name + " = " + name + ";")
		case *ast.ClassDeclaration:
			name := s.Class.Name.Name.String()
			hoisted = append(hoisted, name)
			out.WriteString(name + " = " + text(st) + ";")
		case *ast.ExpressionStatement:
			if i == len(fn.List)-1 {
				out.WriteString("return (" + text(s.Expression) + ");")
			} else {
				out.WriteString(text(st))
			}
		default:
			out.WriteString(text(st))
		}
	}
	out.WriteString(src[pos : len(src)-len(awaitTail)])
	head := ""
	if len(hoisted) > 0 {
		head = "var " + strings.Join(hoisted, ", ") + ";\n"
	}
	return head + "$$.sendResult(" + awaitHead + out.String() + awaitTail + ")"
}

// asyncBody returns the block of the async arrow function st calls.
func asyncBody(st ast.Statement) (*ast.BlockStatement, bool) {
	es, ok := st.(*ast.ExpressionStatement)
	if !ok {
		return nil, false
	}
	call, ok := es.Expression.(*ast.CallExpression)
	if !ok {
		return nil, false
	}
	arrow, ok := call.Callee.(*ast.ArrowFunctionLiteral)
	if !ok {
		return nil, false
	}
	body, ok := arrow.Body.(*ast.BlockStatement)
	return body, ok
}

// assignBindings writes a declaration's bindings as one assignment
// expression and returns hoisted with the names it declares.
func assignBindings(out *strings.Builder, list []*ast.Binding, text func(ast.Node) string, hoisted []string) []string {
	var parts []string
	for _, b := range list {
		hoisted = bindingNames(b.Target, hoisted)
		if b.Initializer != nil {
			parts = append(parts, "("+text(b.Target)+" = "+text(b.Initializer)+")")
		}
	}
	if len(parts) > 0 {
		out.WriteString("void (" + strings.Join(parts, ", ") + ");")
	}
	return hoisted
}

// bindingNames appends the identifiers a binding target declares.
func bindingNames(n ast.Node, names []string) []string {
	switch t := n.(type) {
	case *ast.Identifier:
		names = append(names, t.Name.String())
	case *ast.AssignExpression: // a default value
		names = bindingNames(t.Left, names)
	case *ast.ObjectPattern:
		for _, p := range t.Properties {
			switch p := p.(type) {
			case *ast.PropertyShort:
				names = append(names, p.Name.Name.String())
			case *ast.PropertyKeyed:
				names = bindingNames(p.Value, names)
			}
		}
		if t.Rest != nil {
			names = bindingNames(t.Rest, names)
		}
	case *ast.ArrayPattern:
		for _, e := range t.Elements {
			if e != nil {
				names = bindingNames(e, names)
			}
		}
		if t.Rest != nil {
			names = bindingNames(t.Rest, names)
		}
	}
	return names
}
