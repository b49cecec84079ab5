package pgdb

import (
	"context"
	"errors"
	"fmt"

	"github.com/jackc/pgx/v5"

	"github.com/contextinfinity/ctxinf/messages"
	"github.com/contextinfinity/ctxinf/persistence"
)

// Tenancy on PostgreSQL, as tenancy.go on Badger: a branch made with
// BranchSpec.Tenant (not DefaultTenant) has a row in ctx_branch_tenants,
// written with its head; the root turn its first append makes has one
// in ctx_root_tenants, written with the turn. A session's tenant is its
// row's (ctx_sessions.tenant, SessionRow.TenantName).

// pgRootTenant is the owner of a root turn a group appends.
type pgRootTenant struct {
	turn   messages.TurnID
	tenant string
}

// ownRoot records, in the group, the tenant of root, a root turn
// appended to branch (whose head is ph): the branch's owner, if it has
// one, read once per group.
func (g *pgGroup) ownRoot(branch messages.BranchID, ph *pgHead, root messages.TurnID) error {
	if !ph.tenantKnown {
		var t string
		err := g.readOne(func(v []byte) error {
			t = string(v)
			return nil
		}, `SELECT tenant FROM ctx_branch_tenants WHERE branch = $1`, branch[:])
		if err != nil {
			return err
		}
		ph.tenant, ph.tenantKnown = t, true
	}
	if ph.tenant != "" {
		g.rootTenants = append(g.rootTenants, pgRootTenant{root, ph.tenant})
	}
	return nil
}

// queueTenants adds the owner rows of the group's new branches and roots
// to b. Both name ids the group creates, so they are inserts.
func (g *pgGroup) queueTenants(b *pgx.Batch, checks []pgCheck) []pgCheck {
	for _, id := range g.newBranches {
		if t := g.heads[id].tenant; t != "" {
			b.Queue(`INSERT INTO ctx_branch_tenants (branch, tenant) VALUES ($1, $2)`, id[:], []byte(t))
			checks = append(checks, pgCheck{"insert tenant of branch " + id.String(), false})
		}
	}
	for _, r := range g.rootTenants {
		b.Queue(`INSERT INTO ctx_root_tenants (turn, tenant) VALUES ($1, $2)`, r.turn[:], []byte(r.tenant))
		checks = append(checks, pgCheck{"insert tenant of root " + r.turn.String(), false})
	}
	return checks
}

// pgBranchTenantCols selects, for the branch in column branch of the
// outer query, whether its head exists, whether it has a branch row, its
// session's tenant and its owner row's tenant: what branchTenant reads.
const pgBranchTenantCols = `EXISTS (SELECT 1 FROM ctx_heads h WHERE h.branch = q.branch),
	EXISTS (SELECT 1 FROM ctx_branches r WHERE r.id = q.branch),
	(SELECT convert_to(s.tenant, 'UTF8') FROM ctx_branches r JOIN ctx_sessions s ON s.id = r.session_id WHERE r.id = q.branch),
	(SELECT t.tenant FROM ctx_branch_tenants t WHERE t.branch = q.branch)`

// pgBranchTenant decides a branch's tenant from pgBranchTenantCols, as
// branchTenant does.
func pgBranchTenant(branch messages.BranchID, head, hasRow bool, session, owner []byte) (string, error) {
	switch {
	case !head:
		return "", persistence.BranchNotFound(branch)
	case hasRow:
		return string(session), nil // "" while the session is not written
	case owner != nil:
		return string(owner), nil
	}
	return persistence.DefaultTenant, nil
}

// BranchTenant returns the tenant that owns a branch: its session's for
// a branch of the runtime (none, "", while its session is not written:
// an import under way), its owner row's for one made with
// BranchSpec.Tenant, else DefaultTenant. A branch that does not exist is
// the error Head returns for it. It reads in one statement (one
// snapshot).
func (d *PGDB) BranchTenant(ctx context.Context, branch messages.BranchID) (string, error) {
	if err := d.alive(); err != nil {
		return "", err
	}
	var (
		head, hasRow   bool
		session, owner []byte
	)
	err := d.pool.QueryRow(ctx, `SELECT `+pgBranchTenantCols+` FROM (SELECT $1::BYTEA AS branch) q`, branch[:]).
		Scan(&head, &hasRow, &session, &owner)
	if err != nil {
		return "", d.readErr("read tenant of branch "+branch.String(), err)
	}
	return pgBranchTenant(branch, head, hasRow, session, owner)
}

// TurnTenant returns the tenant that owns a turn: its root's (see
// BranchTenant). A turn that does not exist is the error Turn returns
// for it.
func (d *PGDB) TurnTenant(ctx context.Context, turn messages.TurnID) (string, error) {
	t, err := d.Node(ctx, turn)
	if err != nil {
		return "", err
	}
	root, err := d.ancestorAt(ctx, t.ID, t.Depth, 0)
	if err != nil {
		return "", err
	}
	what := "read tenant of turn " + turn.String()
	// The root's owner row if it has one, else the tenant of the first
	// branch (by id) of its turn rows that still exists, in one
	// statement: the owner row comes first.
	rows, err := d.pool.Query(ctx, `
		SELECT 0, NULL::BYTEA, false, false, NULL::BYTEA, tenant FROM ctx_root_tenants WHERE turn = $1
		UNION ALL
		SELECT 1, q.branch, `+pgBranchTenantCols+`
			FROM (SELECT DISTINCT branch FROM ctx_turn_rows WHERE id = $1) q
		ORDER BY 1, 2`, root[:])
	if err != nil {
		return "", d.readErr(what, err)
	}
	defer rows.Close()
	tenant := persistence.DefaultTenant // a root of no one's turn rows
	for rows.Next() {
		var (
			kind           int
			b              []byte
			head, hasRow   bool
			session, owner []byte
		)
		if err := rows.Scan(&kind, &b, &head, &hasRow, &session, &owner); err != nil {
			return "", d.readErr(what, err)
		}
		if kind == 0 {
			return string(owner), nil
		}
		id, err := messages.IDFromBytes[messages.BranchID](b)
		if err != nil {
			return "", fmt.Errorf("%w: %s: %v", persistence.ErrCorrupt, what, err)
		}
		t, err := pgBranchTenant(id, head, hasRow, session, owner)
		if errors.Is(err, persistence.ErrBranchNotFound) {
			tenant = ""
			continue // a branch deleted since: another may hold it
		}
		return t, err
	}
	if err := rows.Err(); err != nil {
		return "", d.readErr(what, err)
	}
	return tenant, nil
}
