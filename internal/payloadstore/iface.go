package payloadstore

import "github.com/hephaestus-go/hephaestus/store"

var (
	_ store.Store             = (*Store)(nil)
	_ store.TxInserter        = (*Store)(nil)
	_ store.ConcurrentApplier = (*Store)(nil)
	_ store.Admin             = (*adminStore)(nil)
	_ store.Store             = (*adminStore)(nil)
	_ store.Notifier          = (*notifyStore)(nil)
	_ store.Store             = (*notifyStore)(nil)
	_ store.Admin             = (*adminNotifyStore)(nil)
	_ store.Store             = (*adminNotifyStore)(nil)
	_ store.Notifier          = (*adminNotifyStore)(nil)
	_ store.TxInserter        = (*adminNotifyStore)(nil)
)
