package tui

import (
	"cmp"
	"errors"
	"fmt"
	"slices"
	"strings"

	"charm.land/bubbles/v2/key"
	tea "charm.land/bubbletea/v2"

	"github.com/contextinfinity/ctxinf/api"
	"github.com/contextinfinity/ctxinf/messages"
)

// Errors of ResolveBranch.
var (
	// ErrNoBranch: the name is no label, id or id part of a branch.
	ErrNoBranch = errors.New("tui: no such branch")
	// ErrAmbiguousBranch: the name is the label or id part of more
	// than one branch.
	ErrAmbiguousBranch = errors.New("tui: ambiguous branch name")
)

// minBranchIDPart is the fewest characters of an id ResolveBranch takes as
// its start or end.
const minBranchIDPart = 4

// shortIDLen is how many characters of a branch id the screens show.
const shortIDLen = 8

// ResolveBranch finds the branch name names among branches: the one
// labeled name exactly, else the one whose id is name, else the one
// whose id starts or ends with name (case-insensitive, 4 characters at
// least; the screens and the header show an id's last 8). A label or
// id part two branches share is ErrAmbiguousBranch, naming them; a
// name that matches nothing is ErrNoBranch, saying what was tried.
func ResolveBranch(branches []api.Branch, name string) (api.Branch, error) {
	name = strings.TrimSpace(name)
	if name == "" {
		return api.Branch{}, fmt.Errorf("%w: give a branch's label, id or short id", ErrNoBranch)
	}
	var byLabel []api.Branch
	for _, b := range branches {
		if b.Label == name {
			byLabel = append(byLabel, b)
		}
	}
	switch len(byLabel) {
	case 1:
		return byLabel[0], nil
	case 0:
	default:
		return api.Branch{}, fmt.Errorf("%w: %d branches are labeled %q: %s; name one by its short id",
			ErrAmbiguousBranch, len(byLabel), name, candidates(byLabel, branches))
	}
	up := strings.ToUpper(name)
	for _, b := range branches {
		if b.ID.String() == up {
			return b, nil
		}
	}
	if len(up) < minBranchIDPart {
		return api.Branch{}, fmt.Errorf("%w: %q is no branch's label (%s), and a part of an id needs %d characters at least",
			ErrNoBranch, name, labelList(branches), minBranchIDPart)
	}
	var byID []api.Branch
	for _, b := range branches {
		if id := b.ID.String(); strings.HasPrefix(id, up) || strings.HasSuffix(id, up) {
			byID = append(byID, b)
		}
	}
	switch len(byID) {
	case 1:
		return byID[0], nil
	case 0:
		return api.Branch{}, fmt.Errorf("%w: %q is no branch's label (%s), nor the id, start or end of an id of one",
			ErrNoBranch, name, labelList(branches))
	}
	return api.Branch{}, fmt.Errorf("%w: %q starts or ends %d branch ids: %s; type more of the id",
		ErrAmbiguousBranch, name, len(byID), candidates(byID, branches))
}

// candidates names bs for an error: label, and the short id that
// tells it from the others of all.
func candidates(bs, all []api.Branch) string {
	var out []string
	for _, b := range bs {
		out = append(out, branchTitleIn(b, all))
	}
	return strings.Join(out, ", ")
}

// labelList is the labels of branches, for an error.
func labelList(branches []api.Branch) string {
	var ls []string
	for _, b := range branches {
		if b.Label != "" && !slices.Contains(ls, b.Label) {
			ls = append(ls, b.Label)
		}
	}
	if len(ls) == 0 {
		return "no branch has a label"
	}
	return "labels: " + strings.Join(ls, ", ")
}

func labelOrNone(l string) string {
	if l == "" {
		return "(no label)"
	}
	return l
}

// shortBranchID is the short id the screens show, as the header does:
// the id's last characters (a ULID starts with its creation time, which
// branches made close together share; it ends with random bits).
func shortBranchID(id messages.BranchID) string {
	s := id.String()
	return s[max(0, len(s)-shortIDLen):]
}

// uniqueBranchID is the shortest end of id, of shortIDLen characters at
// least, that ends no other id of branches: what to type to name it.
func uniqueBranchID(id messages.BranchID, branches []api.Branch) string {
	s := id.String()
	for n := shortIDLen; n < len(s); n++ {
		p, unique := s[len(s)-n:], true
		for _, b := range branches {
			if b.ID != id && strings.HasSuffix(b.ID.String(), p) {
				unique = false
				break
			}
		}
		if unique {
			return p
		}
	}
	return s
}

// branchTitle is a branch as the screens name it: label and short id.
func branchTitle(label string, id messages.BranchID) string {
	if label == "" {
		return shortBranchID(id)
	}
	return fmt.Sprintf("%s (%s)", label, shortBranchID(id))
}

// What a question of the branches screen is for.
const (
	brFork = iota + 1
	brDelete
	brFilter
)

// branchesScreen is the tree of the current session's branches: switch
// to one, fork one at its head, delete one.
type branchesScreen struct {
	gen     int
	loading bool
	err     error

	all    []api.Branch
	active messages.BranchID // the session's active branch, if known
	rows   []treeRow         // the tree in the order shown, filtered
	cur    int
	top    int
	filter string
	selID  messages.BranchID // the branch to select when the rows are made

	ask    askLine
	target api.Branch // the branch the question is about
	note   string     // the last action's result, shown at the bottom
	noteOK bool
}

// treeRow is a branch in the tree: its row and the lines drawn before it.
type treeRow struct {
	b      api.Branch
	prefix string
}

// NewBranchesScreen returns the branch tree of the current session.
func NewBranchesScreen() Screen { return &branchesScreen{} }

type (
	// branchesMsg is the session's branches as read.
	branchesMsg struct {
		gen    int
		rows   []api.Branch
		active messages.BranchID
		err    error
	}
	// branchesDoneMsg is the result of a fork or a delete.
	branchesDoneMsg struct {
		gen    int
		text   string
		err    error
		sel    messages.BranchID // select it after the reload
		moveTo *api.Branch       // make it current (the current branch was deleted)
	}
)

func (b *branchesScreen) Name() string { return "Branches" }

// Modal reports whether Esc is the screen's: a question is asked (Esc
// cancels it) or a filter is set (Esc clears it).
func (b *branchesScreen) Modal() bool { return b.ask.active() || b.filter != "" }

func (b *branchesScreen) Open(s *State) tea.Cmd {
	*b = branchesScreen{gen: b.gen + 1, selID: s.Branch.ID}
	return b.load(s)
}

func (b *branchesScreen) load(s *State) tea.Cmd {
	b.loading = true
	ctx, be, session, gen := s.Ctx, s.Backend, s.Branch.Session, b.gen
	return func() tea.Msg {
		rows, err := be.Branches(ctx, session)
		if err != nil {
			return branchesMsg{gen: gen, err: err}
		}
		var active messages.BranchID
		if x, err := be.Session(ctx, session); err == nil { // the active mark is a hint: go on without it
			active = x.ActiveBranch
		}
		return branchesMsg{gen: gen, rows: rows, active: active}
	}
}

// Update handles keys and the screen's own results. Esc: while a
// question is asked or a filter is set, Update consumes it (canceling
// the question, clearing the filter; it returns nil) and Modal reports
// true, so the shell must pass it here; otherwise the shell closes the
// screen.
func (b *branchesScreen) Update(s *State, msg tea.Msg) tea.Cmd {
	switch msg := msg.(type) {
	case branchesMsg:
		if msg.gen != b.gen {
			return nil
		}
		b.loading = false
		if msg.err != nil {
			b.err = msg.err
			return sayStatus("", fmt.Errorf("branches: %w", msg.err))
		}
		b.err, b.all, b.active = nil, msg.rows, msg.active
		b.build()
		return nil
	case branchesDoneMsg:
		if msg.gen != b.gen {
			return nil
		}
		if msg.err != nil {
			b.note, b.noteOK = msg.err.Error(), false
			return sayStatus("", msg.err)
		}
		b.note, b.noteOK = msg.text, true
		if !msg.sel.IsZero() {
			b.selID = msg.sel
		}
		cmds := []tea.Cmd{sayStatus(msg.text, nil), b.load(s)}
		if msg.moveTo != nil {
			row := *msg.moveTo
			cmds = append(cmds, func() tea.Msg { return SwitchMsg{Branch: row} })
		}
		return tea.Batch(cmds...)
	case tea.KeyPressMsg:
		return b.key(s, msg)
	}
	return nil
}

func (b *branchesScreen) key(s *State, msg tea.KeyPressMsg) tea.Cmd {
	if b.ask.active() {
		res, cmd := b.ask.key(msg)
		op := b.ask.op
		if op == brFilter {
			switch res {
			case askCanceled:
				b.filter = ""
				b.ask.done()
			case askAccepted:
				b.ask.done()
			default:
				b.filter = b.ask.value()
			}
			b.build()
			return cmd
		}
		switch res {
		case askCanceled:
			b.ask.done()
			return nil
		case askAccepted:
			label := b.ask.value()
			if label == "" {
				label = b.ask.input.Placeholder
			}
			b.ask.done()
			if op == brFork {
				return b.fork(s, b.target, label)
			}
			return b.delete(s, b.target)
		}
		return cmd
	}
	b.note = ""
	switch msg.String() {
	case "esc":
		if b.filter != "" {
			b.filter = ""
			b.build()
		}
		return nil
	case "up", "k":
		b.cur = max(b.cur-1, 0)
	case "down", "j":
		b.cur = max(min(b.cur+1, len(b.rows)-1), 0)
	case "home", "g":
		b.cur = 0
	case "end", "G":
		b.cur = max(len(b.rows)-1, 0)
	case "/":
		b.ask.text(brFilter, "Filter by label:", b.filter, "")
	}
	if len(b.rows) == 0 {
		return nil
	}
	sel := b.rows[b.cur].b
	b.selID = sel.ID
	switch msg.String() {
	case "enter":
		return func() tea.Msg { return SwitchMsg{Branch: sel} }
	case "f":
		b.target = sel
		b.ask.text(brFork, fmt.Sprintf("Fork %s at its head, label:", b.title(sel)), "", "fork")
	case "d", "delete":
		b.target = sel
		b.ask.confirm(brDelete, fmt.Sprintf("Delete branch %s for good: its turns, summaries, pins, chunks and stream journals? It cannot be undone.",
			b.title(sel)))
	}
	return nil
}

func (b *branchesScreen) fork(s *State, from api.Branch, label string) tea.Cmd {
	ctx, be, gen, all := s.Ctx, s.Backend, b.gen, b.all
	return func() tea.Msg {
		row, err := be.Fork(ctx, from.ID, messages.NodeID{}, label)
		if err != nil {
			return branchesDoneMsg{gen: gen, err: fmt.Errorf("fork %s: %w", b.title(from), err)}
		}
		return branchesDoneMsg{gen: gen, sel: row.ID,
			text: fmt.Sprintf("forked %s at its head: branch %s", b.title(from), branchTitleIn(row, append(all, row)))}
	}
}

// title is a branch's label and the part of its id that tells it from
// the others.
func (b *branchesScreen) title(r api.Branch) string { return branchTitleIn(r, b.all) }

// branchTitleIn is branchTitle with the id prefix that is unique in all.
func branchTitleIn(r api.Branch, all []api.Branch) string {
	id := uniqueBranchID(r.ID, all)
	if r.Label == "" {
		return id
	}
	return fmt.Sprintf("%s (%s)", r.Label, id)
}

func (b *branchesScreen) delete(s *State, victim api.Branch) tea.Cmd {
	ctx, be, gen, current, name := s.Ctx, s.Backend, b.gen, s.Branch.ID, b.title(victim)
	var parent *api.Branch
	for i := range b.all {
		if b.all[i].ID == victim.Parent {
			p := b.all[i]
			parent = &p
		}
	}
	return func() tea.Msg {
		res, err := be.DeleteBranch(ctx, victim.ID)
		if err != nil {
			return branchesDoneMsg{gen: gen, err: fmt.Errorf("delete %s: %w", name, err)}
		}
		done := branchesDoneMsg{gen: gen, sel: victim.Parent,
			text: fmt.Sprintf("deleted branch %s for good: %d messages, %d turns", name, res.Nodes, res.Turns)}
		if victim.ID == current && parent != nil {
			done.moveTo = parent
			done.text += "; now on its parent " + b.title(*parent)
		}
		return done
	}
}

// build lays the branches out as a tree (children after their parent,
// by fork point), keeps those the filter matches and selects selID.
func (b *branchesScreen) build() {
	ids := map[messages.BranchID]bool{}
	for _, r := range b.all {
		ids[r.ID] = true
	}
	kids := map[messages.BranchID][]api.Branch{}
	var roots []api.Branch
	for _, r := range b.all {
		if r.Parent.IsZero() || !ids[r.Parent] {
			roots = append(roots, r)
		} else {
			kids[r.Parent] = append(kids[r.Parent], r)
		}
	}
	order := func(x, y api.Branch) int {
		return cmp.Or(cmp.Compare(x.ForkSeq, y.ForkSeq), x.Created.Compare(y.Created), x.ID.Compare(y.ID))
	}
	slices.SortFunc(roots, order)
	var rows []treeRow
	var walk func(r api.Branch, lead, stem string)
	walk = func(r api.Branch, lead, stem string) {
		rows = append(rows, treeRow{b: r, prefix: lead})
		ks := kids[r.ID]
		slices.SortFunc(ks, order)
		for i, k := range ks {
			if i == len(ks)-1 {
				walk(k, stem+"└─ ", stem+"   ")
			} else {
				walk(k, stem+"├─ ", stem+"│  ")
			}
		}
	}
	for _, r := range roots {
		walk(r, "", "")
	}
	if f := strings.ToLower(b.filter); f != "" {
		rows = slices.DeleteFunc(rows, func(t treeRow) bool { return !strings.Contains(strings.ToLower(t.b.Label), f) })
	}
	b.rows, b.cur = rows, min(b.cur, max(len(rows)-1, 0))
	for i, t := range rows {
		if t.b.ID == b.selID {
			b.cur = i
		}
	}
}

func (b *branchesScreen) View(s *State, width, height int) string {
	if height < 1 || width < 1 {
		return ""
	}
	title := fmt.Sprintf("Branches of this session · %d", len(b.all))
	if b.filter != "" {
		title += fmt.Sprintf(" · %d labeled *%s*", len(b.rows), b.filter)
	}
	lines := []string{title}
	var bottom []string
	switch {
	case b.ask.active():
		bottom = b.ask.view(width)
	case b.note != "":
		mark := "✗ "
		if b.noteOK {
			mark = "✓ "
		}
		bottom = cellWrap(mark+b.note, width)
		bottom = bottom[:min(len(bottom), 3)]
	default:
		bottom = []string{"* current · (active): the session's · @N: forked after its parent's turn N"}
	}
	rows := height - 1 - len(bottom)
	if rows < 1 {
		return cellBlock(lines, width, height)
	}
	switch {
	case b.loading && b.all == nil:
		lines = append(lines, "loading…")
	case b.err != nil && b.all == nil:
		lines = append(lines, cellWrap("could not read the branches: "+b.err.Error(), width)...)
	case len(b.rows) == 0 && b.filter != "":
		lines = append(lines, fmt.Sprintf("no branch label contains %q (esc clears the filter)", b.filter))
	default:
		lines = append(lines, b.treeView(s, width, rows)...)
	}
	for len(lines) < height-len(bottom) {
		lines = append(lines, "")
	}
	return cellBlock(append(lines[:height-len(bottom)], bottom...), width, height)
}

// treeView is the rows of the tree, the selected one visible.
func (b *branchesScreen) treeView(s *State, width, rows int) []string {
	b.top = listWindow(b.top, b.cur, len(b.rows), rows)
	nameW := 0
	for _, t := range b.rows {
		nameW = max(nameW, len([]rune(t.prefix+labelOrNone(t.b.Label))))
	}
	nameW = min(nameW, max(12, width/2))
	idW := 0
	for _, t := range b.rows {
		idW = max(idW, len(uniqueBranchID(t.b.ID, b.all)))
	}
	var out []string
	for i := b.top; i < min(len(b.rows), b.top+rows); i++ {
		t := b.rows[i]
		sel, cur := "  ", "  "
		if i == b.cur {
			sel = "› "
		}
		if t.b.ID == s.Branch.ID {
			cur = "* "
		}
		name := cellFit(t.prefix+labelOrNone(t.b.Label), nameW)
		name += strings.Repeat(" ", max(0, nameW-len([]rune(name))))
		l := sel + cur + name + fmt.Sprintf("  %-*s", idW, uniqueBranchID(t.b.ID, b.all))
		if !t.b.Parent.IsZero() {
			l += fmt.Sprintf("  @%-3d", t.b.ForkSeq)
		} else {
			l += "      "
		}
		if t.b.ID == b.active {
			l += "  (active)"
		}
		if i == b.cur {
			l = pickedRow.Render(cellFit(l, width))
		}
		out = append(out, l)
	}
	return out
}

func (b *branchesScreen) Keys() []key.Binding {
	if b.ask.active() {
		what := "ok"
		switch b.ask.op {
		case brFork:
			what = "fork"
		case brDelete:
			return []key.Binding{
				key.NewBinding(key.WithKeys("y"), key.WithHelp("y", "delete")),
				key.NewBinding(key.WithKeys("n", "esc"), key.WithHelp("n/esc", "keep it")),
			}
		case brFilter:
			what = "keep the filter"
		}
		return []key.Binding{
			key.NewBinding(key.WithKeys("enter"), key.WithHelp("enter", what)),
			key.NewBinding(key.WithKeys("esc"), key.WithHelp("esc", "cancel")),
		}
	}
	esc := key.NewBinding(key.WithKeys("esc"), key.WithHelp("esc", "close"))
	if b.filter != "" {
		esc = key.NewBinding(key.WithKeys("esc"), key.WithHelp("esc", "clear filter"))
	}
	return []key.Binding{
		key.NewBinding(key.WithKeys("up", "down", "k", "j"), key.WithHelp("↑/↓", "select")),
		key.NewBinding(key.WithKeys("enter"), key.WithHelp("enter", "switch")),
		key.NewBinding(key.WithKeys("f"), key.WithHelp("f", "fork")),
		key.NewBinding(key.WithKeys("d", "delete"), key.WithHelp("d", "delete")),
		key.NewBinding(key.WithKeys("/"), key.WithHelp("/", "filter")),
		esc,
	}
}
