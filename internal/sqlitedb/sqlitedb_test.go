package sqlitedb

import (
	"context"
	"path/filepath"
	"testing"
)

var migrations = []string{
	`CREATE TABLE t (id INTEGER PRIMARY KEY, v TEXT NOT NULL)`,
	`ALTER TABLE t ADD COLUMN w INTEGER NOT NULL DEFAULT 7`,
}

func TestMemoryIsPrivateAndShared(t *testing.T) {
	ctx := context.Background()
	a, err := Open("")
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	b, err := Open("")
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	if err := Migrate(ctx, a, migrations); err != nil {
		t.Fatal(err)
	}
	// Two pooled connections of a see the same table.
	c1, _ := a.Conn(ctx)
	c2, _ := a.Conn(ctx)
	if _, err := c1.ExecContext(ctx, `INSERT INTO t(v) VALUES ('x')`); err != nil {
		t.Fatal(err)
	}
	var n int
	if err := c2.QueryRowContext(ctx, `SELECT count(*) FROM t`).Scan(&n); err != nil || n != 1 {
		t.Fatalf("second connection sees %d rows, err %v", n, err)
	}
	c1.Close()
	c2.Close()
	// b is a different database.
	if err := b.QueryRowContext(ctx, `SELECT count(*) FROM t`).Scan(&n); err == nil {
		t.Fatal("second memory database shares tables with the first")
	}
}

func TestMigrateFileIsIdempotentAndVersioned(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "x y.db")
	db, err := Open(path)
	if err != nil {
		t.Fatal(err)
	}
	if err := Migrate(ctx, db, migrations[:1]); err != nil {
		t.Fatal(err)
	}
	db.Exec(`INSERT INTO t(v) VALUES ('kept')`)
	db.Close()

	db, err = Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	if err := Migrate(ctx, db, migrations); err != nil {
		t.Fatal(err)
	}
	if err := Migrate(ctx, db, migrations); err != nil {
		t.Fatal(err)
	}
	var v string
	var w, version int
	if err := db.QueryRow(`SELECT v, w FROM t`).Scan(&v, &w); err != nil || v != "kept" || w != 7 {
		t.Fatalf("row = %q %d, %v", v, w, err)
	}
	db.QueryRow(`PRAGMA user_version`).Scan(&version)
	if version != 2 {
		t.Fatalf("user_version = %d", version)
	}
	var mode string
	db.QueryRow(`PRAGMA journal_mode`).Scan(&mode)
	if mode != "wal" {
		t.Fatalf("journal_mode = %s", mode)
	}
	if err := Migrate(ctx, db, migrations[:1]); err == nil {
		t.Fatal("older code accepted a newer schema")
	}
}

func TestBadMigrationChangesNothing(t *testing.T) {
	ctx := context.Background()
	db, err := Open("")
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	bad := []string{migrations[0], `CREATE TABLE u (x); SELECT nonsense FROM nowhere`}
	if err := Migrate(ctx, db, bad); err == nil {
		t.Fatal("bad migration applied")
	}
	var version int
	db.QueryRow(`PRAGMA user_version`).Scan(&version)
	if version != 1 {
		t.Fatalf("user_version = %d, want 1", version)
	}
	if _, err := db.Exec(`SELECT * FROM u`); err == nil {
		t.Fatal("half-applied migration left table u")
	}
}

func TestMemoryConcurrentWriters(t *testing.T) {
	ctx := context.Background()
	db, err := Open("")
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	if err := Migrate(ctx, db, migrations); err != nil {
		t.Fatal(err)
	}
	errs := make(chan error, 16)
	for i := 0; i < 16; i++ {
		go func() {
			for j := 0; j < 20; j++ {
				tx, err := db.BeginTx(ctx, nil)
				if err != nil {
					errs <- err
					return
				}
				var n int
				tx.QueryRow(`SELECT count(*) FROM t`).Scan(&n)
				if _, err := tx.Exec(`INSERT INTO t(v) VALUES ('c')`); err != nil {
					tx.Rollback()
					errs <- err
					return
				}
				if err := tx.Commit(); err != nil {
					errs <- err
					return
				}
			}
			errs <- nil
		}()
	}
	for i := 0; i < 16; i++ {
		if err := <-errs; err != nil {
			t.Fatal(err)
		}
	}
	var n int
	db.QueryRow(`SELECT count(*) FROM t`).Scan(&n)
	if n != 320 {
		t.Fatalf("rows = %d, want 320", n)
	}
}

func TestEveryConnectionSecureDeletes(t *testing.T) {
	ctx := context.Background()
	for _, path := range []string{"", filepath.Join(t.TempDir(), "x.db")} {
		db, err := Open(path)
		if err != nil {
			t.Fatal(err)
		}
		db.SetMaxOpenConns(3)
		var conns []interface{ Close() error }
		for range 3 {
			c, err := db.Conn(ctx)
			if err != nil {
				t.Fatal(err)
			}
			conns = append(conns, c)
			var on int
			if err := c.QueryRowContext(ctx, "PRAGMA secure_delete").Scan(&on); err != nil || on != 1 {
				t.Fatalf("%q: secure_delete = %d, %v", path, on, err)
			}
		}
		for _, c := range conns {
			c.Close()
		}
		if done, err := Checkpoint(ctx, db); err != nil || !done {
			t.Fatalf("%q: checkpoint %v, %v", path, done, err)
		}
		db.Close()
	}
}
