package persistence

import "context"

var bg = context.Background()
