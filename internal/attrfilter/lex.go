package attrfilter

import (
	"encoding/json"
	"fmt"
	"strings"
	"unicode/utf8"
)

type tokKind int

const (
	tEOF tokKind = iota
	tWord
	tString
	tOp
	tOpen
	tClose
	tComma
	tBad
)

type token struct {
	kind tokKind
	text string
	pos  int    // byte offset from 1
	err  string // a string that cannot be read
}

func (t token) describe() string {
	switch t.kind {
	case tEOF:
		return "the end of the filter"
	case tString:
		return fmt.Sprintf("the string %q", t.text)
	case tBad:
		return fmt.Sprintf("the character %q", t.text)
	}
	return fmt.Sprintf("%q", t.text)
}

type lexer struct {
	src string
	i   int
}

// wordEnd lists the characters that end a word.
const wordEnd = " \t\r\n[],\"=!<>"

func (l *lexer) next() token {
	for l.i < len(l.src) && strings.IndexByte(" \t\r\n", l.src[l.i]) >= 0 {
		l.i++
	}
	start := l.i
	tok := token{pos: start + 1}
	if l.i >= len(l.src) {
		return tok
	}
	c := l.src[l.i]
	switch {
	case c == '[':
		l.i++
		tok.kind, tok.text = tOpen, "["
	case c == ']':
		l.i++
		tok.kind, tok.text = tClose, "]"
	case c == ',':
		l.i++
		tok.kind, tok.text = tComma, ","
	case c == '"':
		return l.str(tok)
	case strings.IndexByte("=!<>", c) >= 0:
		l.i++
		if l.i < len(l.src) && l.src[l.i] == '=' && c != '=' {
			l.i++
		}
		tok.kind, tok.text = tOp, l.src[start:l.i]
		if tok.text == "!" {
			tok.kind = tBad
		}
	default:
		for l.i < len(l.src) && strings.IndexByte(wordEnd, l.src[l.i]) < 0 {
			l.i++
		}
		tok.kind, tok.text = tWord, l.src[start:l.i]
		if !utf8.ValidString(tok.text) {
			tok.kind = tBad
		}
	}
	return tok
}

// str reads a quoted string, with the escapes of JSON.
func (l *lexer) str(tok token) token {
	tok.kind = tString
	j := l.i + 1
	for j < len(l.src) && l.src[j] != '"' {
		if l.src[j] == '\\' {
			j++
		}
		j++
	}
	if j >= len(l.src) {
		l.i = len(l.src)
		tok.err = "the string is not closed (\")"
		return tok
	}
	raw := l.src[l.i : j+1]
	l.i = j + 1
	if err := json.Unmarshal([]byte(raw), &tok.text); err != nil || !utf8.ValidString(raw) {
		tok.err = fmt.Sprintf("%s is not a valid string (JSON escapes)", raw)
	}
	return tok
}
