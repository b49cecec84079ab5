package badgerdb

import "context"

var bg = context.Background()
